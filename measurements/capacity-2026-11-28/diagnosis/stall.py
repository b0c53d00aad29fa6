import json, os, signal, subprocess, sys, time
from pathlib import Path
from controller.hostnet import netns_cmd
from experiments.platform.fidelity import queue_drops
from experiments.platform.net import Emulation, EmulationOptions
from topologies.fabric import leaf_spine
fabric = leaf_spine(spines=2, leaves=3, hosts_per_leaf=2, host_mbps=100, fabric_mbps=100)
stall = float(sys.argv[1])
def ns(em, h, cmd):
    return subprocess.run(netns_cmd(em.host(h).pid, cmd), capture_output=True, text=True).stdout
with Emulation(fabric, "/tmp/diag/stallrun", options=EmulationOptions(tcp_rto_min_ms=40, tcp_congestion="cubic")) as em:
    inst = em.ovs_of_switch["tbl1"]; pid = inst.pids()["ovs-vswitchd"]
    em.net.pingAll(timeout=2)
    pc0 = em.port_counters(); d0 = inst.packet_socket_drops()
    server = em.popen("tbh3", ["iperf3", "-s", "-1", "-p", "5403", "-J"], stdout=subprocess.PIPE, text=True)
    em.wait_listening("tbh3", [5403])
    client = em.popen("tbh1", ["iperf3", "-c", "10.0.0.3", "-p", "5403", "-u", "-b", "80M", "-l", "1400", "-t", "2"], stdout=subprocess.DEVNULL)
    time.sleep(1.0)
    if stall:
        os.kill(pid, signal.SIGSTOP); time.sleep(stall); os.kill(pid, signal.SIGCONT)
    client.wait(30); rep = json.loads(server.communicate(timeout=10)[0])
    pc1 = em.port_counters()
    print("lost", rep["end"]["sum"]["lost_packets"], "of", rep["end"]["sum"]["packets"])
    print("queue drops", queue_drops(pc1) - queue_drops(pc0))
    for port in pc1:
        for q in pc1[port]:
            dd = pc1[port][q]["dropped"] - pc0[port][q]["dropped"]
            if dd: print("  ", port, q, dd)
    print("sock drops", {k: v - d0.get(k, 0) for k, v in inst.packet_socket_drops().items() if v != d0.get(k, 0)})
    print("other inst", [i.packet_socket_drops() for i in em.ovs if i is not inst])
    print(ns(em, "tbh3", ["nstat", "-az", "UdpRcvbufErrors", "UdpInErrors", "UdpInDatagrams"]))
    print(ns(em, "tbh1", ["tc", "-s", "qdisc", "show"])[:1500])
    print(json.dumps(em.switch_packet_balance()))
    links = json.loads(subprocess.run(["ip", "-s", "-j", "link", "show"], capture_output=True, text=True).stdout)
    for l in links:
        if l["ifname"].startswith("tbl1") or l["ifname"].startswith("tbs2"):
            print(l["ifname"], l["stats64"]["rx"], l["stats64"]["tx"])
    for i in ("tbl1-eth1", "tbl1-eth4", "tbl1-eth3"):
        print(i, inst._run("ovs-vsctl", "get", "Interface", i, "statistics"))
    print(open("/proc/net/softnet_stat").read())
