"""Reading a private OVS instance's sockets (no root, no fabric: ``ss`` text as data)."""
from __future__ import annotations

from experiments.platform.ovs import parse_packet_socket_drops

SS = (
    'p_raw UNCONN 0 0 [0]:* * users:(("ovs-vswitchd",pid=5898,fd=66)) '
    "skmem:(r0,rb212992,t0,tb62400000,f0,w0,o0,bl0,d0)\n"
    'p_raw UNCONN 0 0 *:tbs1-eth1 * users:(("ovs-vswitchd",pid=5898,fd=43)) '
    "skmem:(r0,rb212992,t0,tb212992,f0,w0,o176,bl0,d798)\n"
    'p_raw UNCONN 0 0 *:tbs1-eth2 * users:(("ovs-vswitchd",pid=5898,fd=44))\n'
    "\t skmem:(r0,rb30600000,t0,tb212992,f0,w0,o176,bl0,d12)\n"
    'p_raw UNCONN 0 0 *:tbs2-eth1 * users:(("ovs-vswitchd",pid=5907,fd=43)) '
    "skmem:(r0,rb212992,t0,tb212992,f0,w0,o176,bl0,d5)\n"
    'p_raw UNCONN 0 0 *:eth0 * users:(("dhclient",pid=77,fd=5)) skmem:(r0,rb212992,t0,tb212992,f0,w0,o0,bl0,d9)\n'
)


def test_parse_packet_socket_drops_are_the_instances_own_by_interface_wrapped_lines_too():
    assert parse_packet_socket_drops(SS, 5898) == {"*": 0, "tbs1-eth1": 798, "tbs1-eth2": 12}
    assert parse_packet_socket_drops(SS, 5907) == {"tbs2-eth1": 5}
    assert parse_packet_socket_drops(SS, None) == {}
