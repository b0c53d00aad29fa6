/* sendmmsg for ovs-vswitchd (LD_PRELOAD, experiments.platform.ovs): a switch port's
 * queue that refuses a packet drops that packet alone.
 *
 * OVS 3.1 (netdev_linux_sock_batch_send) hands a port up to 32 packets in one
 * sendmmsg on an AF_PACKET socket. When the port's qdisc refuses one (ENOBUFS: a
 * full queue, which counts the drop), the call stops there; OVS sends again from the
 * refused packet and, refused again, gives up the rest of the batch: packets of any
 * queue, lost with no counter showing them, and one drop counted twice. Here each
 * message of an AF_PACKET batch is sent on its own and a refusal moves on to the
 * next, so the queues' counters are the switch's losses, one each. Any other error
 * ends the call as sendmmsg's would. Other sockets go to the real sendmmsg.
 *
 * TRAINBED_SEND_COUNTS names a file this library keeps three counters in (uint64,
 * native order): messages sent, refused by a queue, ended by another error. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

enum { SENT, REFUSED, FAILED, N_COUNTS };

static uint64_t *counts;
static int (*real_sendmmsg)(int, struct mmsghdr *, unsigned int, int);

__attribute__((constructor)) static void init(void)
{
    real_sendmmsg = (int (*)(int, struct mmsghdr *, unsigned int, int))dlsym(RTLD_NEXT, "sendmmsg");
    const char *path = getenv("TRAINBED_SEND_COUNTS");
    if (path == NULL)
        return;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    size_t size = N_COUNTS * sizeof(uint64_t);
    if (ftruncate(fd, size) == 0) {
        void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED)
            counts = map;
    }
    close(fd);
}

static void count(int which)
{
    if (counts != NULL)
        __atomic_fetch_add(&counts[which], 1, __ATOMIC_RELAXED);
}

int sendmmsg(int fd, struct mmsghdr *msgs, unsigned int n, int flags)
{
    int domain = 0;
    socklen_t len = sizeof domain;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_PACKET)
        return real_sendmmsg(fd, msgs, n, flags);
    for (unsigned int i = 0; i < n; i++) {
        ssize_t sent = sendmsg(fd, &msgs[i].msg_hdr, flags);
        if (sent >= 0) {
            msgs[i].msg_len = (unsigned int)sent;
            count(SENT);
        } else if (errno == ENOBUFS) {
            msgs[i].msg_len = 0;
            count(REFUSED);
        } else {
            count(FAILED);
            return i > 0 ? (int)i : -1;  /* errno as sendmsg left it */
        }
    }
    return (int)n;
}
