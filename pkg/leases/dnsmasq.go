package leases

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// ParseDnsmasq reads dnsmasq's leases file (dhcp-leasefile) and returns the leases current
// at now.
//
// Each IPv4 line is `<expiry-epoch> <mac> <ip> <hostname|*> <client-id|*>`; expiry 0 means
// infinite. The `duid <server-duid>` line and the IPv6 lines after it (whose second field is
// an IAID, not a MAC) are skipped, as are hardware addresses that are not 6-octet Ethernet
// MACs (dnsmasq prefixes other types with their ARP type, e.g. `20-...`). dnsmasq rewrites
// the whole file, so a MAC appears once; if it appears again the later line wins.
func ParseDnsmasq(r io.Reader, now time.Time) (map[string]Lease, error) {
	out := make(map[string]Lease, sizeHint(r)/80) // dnsmasq writes about 80 bytes per lease
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxLineLength)
	var fields [6][]byte
	line := 0
	for sc.Scan() {
		line++
		n := splitFields(sc.Bytes(), fields[:])
		if n == 0 || string(fields[0]) == "duid" {
			continue
		}
		if n < 4 || n > 5 {
			return nil, fmt.Errorf("line %d: want `<expiry> <mac> <ip> <hostname> <client-id>`, got %d fields", line, n)
		}
		expiry, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil || expiry < 0 {
			return nil, fmt.Errorf("line %d: field 1 (expiry) is not a Unix time", line)
		}
		if bytes.IndexByte(fields[2], ':') >= 0 {
			continue // an IPv6 lease: field 2 is an IAID, not a MAC
		}
		ip, ok := parseIPv4(fields[2])
		if !ok {
			return nil, fmt.Errorf("line %d: field 3 is not an IPv4 address", line)
		}
		mac, ok := parseMAC(fields[1])
		if !ok {
			continue
		}
		l := Lease{MAC: formatMAC(mac), IP: formatIPv4(ip)}
		if h := fields[3]; string(h) != "*" {
			l.Hostname = string(h)
		}
		if expiry != 0 {
			t := time.Unix(expiry, 0).UTC()
			if !t.After(now) {
				delete(out, l.MAC) // a later, expired line still supersedes an earlier one
				continue
			}
			l.Expires = &t
		}
		out[l.MAC] = l
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d: longer than %d bytes: not a leases file", line+1, maxLineLength)
		}
		return nil, err
	}
	return out, nil
}

// splitFields splits on blanks into at most len(dst) fields, without allocating, and
// returns how many there were (len(dst) when there were more).
func splitFields(b []byte, dst [][]byte) int {
	n := 0
	for i := 0; i < len(b); {
		if b[i] == ' ' || b[i] == '\t' || b[i] == '\r' {
			i++
			continue
		}
		if n == len(dst) {
			return n
		}
		j := i + 1
		for j < len(b) && b[j] != ' ' && b[j] != '\t' && b[j] != '\r' {
			j++
		}
		dst[n] = b[i:j]
		n++
		i = j
	}
	return n
}
