# Network filters for the stand-in's inventory checks. Kubespray asserts these with
# ansible.utils.ipaddr, a collection Debian's ansible-core does not ship; these give the same
# answers for the cases the checks ask about, with Python's ipaddress module.
import ipaddress


def sim_network(value):
    """The network value names ('' when it is not a network range: a bad address, or an
    address with host bits set, as ipaddr('net') refuses)."""
    try:
        return str(ipaddress.ip_network(str(value), strict=True))
    except ValueError:
        return ''


def sim_prefix(value):
    return ipaddress.ip_network(str(value), strict=False).prefixlen


def sim_within(value, network):
    """Whether network value lies inside network (ipaddr(network) returning the value)."""
    try:
        return ipaddress.ip_network(str(value), strict=False).subnet_of(ipaddress.ip_network(str(network), strict=False))
    except (ValueError, TypeError):
        return False


class FilterModule(object):
    def filters(self):
        return {'sim_network': sim_network, 'sim_prefix': sim_prefix, 'sim_within': sim_within}
