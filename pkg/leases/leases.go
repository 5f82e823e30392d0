// Package leases maps MAC addresses to IP addresses from the places DHCP records them: ISC
// dhcpd's leases file, dnsmasq's leases file, and the NICs metal3 inspection recorded on a
// BareMetalHost.
//
// The file parsers stream (one bufio pass, constant memory besides the result), normalise
// MACs to lower-case colon form, and return an error rather than panic on anything they do
// not understand: the files are written by another program while we read them, and a
// half-written lease must never become an address in an inventory.
//
// Their errors name the line and what was expected there, never what the line holds: a
// lease path may name a file that holds a secret (say /etc/kubernetes/admin.conf), and
// the error ends up in the CR's status.
package leases

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Lease is the current address of one MAC.
type Lease struct {
	MAC      string `json:"mac"`
	IP       string `json:"ip"`
	Hostname string `json:"hostname"`
	// Expires is when the lease ends; nil means never (ISC `ends never`, dnsmasq expiry 0,
	// or an address recorded on a BareMetalHost).
	Expires *time.Time `json:"expires"`
}

// Format names a leases file format.
type Format string

const (
	FormatISC     Format = "isc"
	FormatDnsmasq Format = "dnsmasq"
)

// ParseFormat accepts the CLI spelling (isc, dnsmasq) and the CR's LeaseSourceType spelling
// (ISC, Dnsmasq), which the WorkflowTemplate passes through unchanged.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case FormatISC, FormatDnsmasq:
		return f, nil
	}
	return "", fmt.Errorf("unknown leases format %q: want isc or dnsmasq", s)
}

// Parse reads a leases file of format f and returns the leases current at now, by MAC.
func Parse(r io.Reader, f Format, now time.Time) (map[string]Lease, error) {
	switch f {
	case FormatISC:
		return ParseISC(r, now)
	case FormatDnsmasq:
		return ParseDnsmasq(r, now)
	}
	return nil, fmt.Errorf("unknown leases format %q: want isc or dnsmasq", f)
}

// ParseFile is Parse on a file, with the file name in errors.
func ParseFile(path string, f Format, now time.Time) (map[string]Lease, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	m, err := Parse(file, f, now)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// sizeHint returns the number of bytes r holds when that is cheap to know (files and
// in-memory readers), else 0. The parsers use it to size their maps.
func sizeHint(r io.Reader) int {
	const most = 1 << 28 // a hint, not an allocation of whatever size a file claims
	n := 0
	switch v := r.(type) {
	case interface{ Len() int }:
		n = v.Len()
	case *os.File:
		if fi, err := v.Stat(); err == nil && fi.Mode().IsRegular() {
			n = int(min(fi.Size(), most))
		}
	}
	return max(0, min(n, most))
}

// Sorted returns the leases ordered by MAC, the order `bpa leases` prints.
func Sorted(m map[string]Lease) []Lease {
	out := make([]Lease, 0, len(m))
	for _, l := range m {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MAC < out[j].MAC })
	return out
}

// NormalizeMAC returns a 6-octet MAC address in lower-case, colon-separated form. It
// accepts `:` or `-` separators (one style per address), any case, and one-digit octets
// (old dhcpd versions wrote `0:c:29:...`). Anything else, including 20-octet InfiniBand
// addresses, is refused.
func NormalizeMAC(s string) (string, bool) {
	m, ok := parseMAC([]byte(s))
	if !ok {
		return "", false
	}
	return formatMAC(m), true
}

// parseMAC reads a MAC into the low 48 bits of a uint64, which the parsers use as a map
// key: hashing an integer is several times cheaper than hashing a string.
func parseMAC(b []byte) (uint64, bool) {
	var mac uint64
	var cur, sep byte
	octets, digits := 0, 0
	for i := 0; i <= len(b); i++ {
		if i == len(b) || b[i] == ':' || b[i] == '-' {
			if digits == 0 || octets == 6 {
				return 0, false
			}
			if i < len(b) {
				if sep != 0 && b[i] != sep {
					return 0, false
				}
				sep = b[i]
			}
			mac = mac<<8 | uint64(cur)
			octets++
			cur, digits = 0, 0
			continue
		}
		v, ok := hexDigit(b[i])
		if !ok || digits == 2 {
			return 0, false
		}
		cur = cur<<4 | v
		digits++
	}
	return mac, octets == 6
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// formatMAC writes the normal form of a parsed MAC.
func formatMAC(mac uint64) string { return string(appendMAC(make([]byte, 0, 17), mac)) }

func appendMAC(b []byte, mac uint64) []byte {
	const hex = "0123456789abcdef"
	for i := 0; i < 6; i++ {
		o := byte(mac >> (8 * (5 - i)))
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hex[o>>4], hex[o&15])
	}
	return b
}

// parseIPv4 reads a dotted-quad IPv4 address as net.ParseIP does (no leading zeros), into
// a uint32 for the same reason as parseMAC.
func parseIPv4(b []byte) (uint32, bool) {
	var ip uint32
	octets, digits, cur := 0, 0, 0
	for i := 0; i <= len(b); i++ {
		if i == len(b) || b[i] == '.' {
			if digits == 0 || octets == 4 {
				return 0, false
			}
			ip = ip<<8 | uint32(cur)
			octets++
			cur, digits = 0, 0
			continue
		}
		c := b[i]
		if c < '0' || c > '9' || (digits == 1 && cur == 0) {
			return 0, false
		}
		cur = cur*10 + int(c-'0')
		digits++
		if cur > 255 {
			return 0, false
		}
	}
	return ip, octets == 4
}

func formatIPv4(ip uint32) string { return string(appendIPv4(make([]byte, 0, 15), ip)) }

func appendIPv4(b []byte, ip uint32) []byte {
	b = strconv.AppendUint(b, uint64(ip>>24), 10)
	for _, shift := range []uint{16, 8, 0} {
		b = append(b, '.')
		b = strconv.AppendUint(b, uint64(ip>>shift&255), 10)
	}
	return b
}
