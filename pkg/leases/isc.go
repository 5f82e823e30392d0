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

// maxLineLength bounds one line of a leases file. dhcpd's longest lines (uid and option
// strings) are far below it; a longer line means the file is not a leases file.
const maxLineLength = 1 << 20

// ParseISC reads an ISC dhcpd.leases(5) file and returns the leases current at now.
//
// dhcpd appends a new `lease <ip> { ... }` block every time a lease changes, so the file is
// a log: the last block for an IP says who holds it, and the last block for a MAC says what
// that MAC holds. A MAC has a current lease when its last block is `binding state active`,
// its `ends` is after now (or `never`), and no later block has reused its IP. A block
// without `ends` counts as ended, as dhcpd itself reads it.
//
// Everything else is skipped: comments, top-level statements (authoring-byte-order,
// server-duid, ...), and blocks other than IPv4 leases (failover peer, host, class, and
// the IPv6 ia-na/ia-ta/ia-pd blocks with their nested iaaddr/iaprefix blocks), as are
// statements of a lease that carry nothing we need (on-events with nested braces, set,
// option, uid, ...). A syntax error (unbalanced braces, an unterminated string, a bad date,
// a file that stops inside a block) is an error naming the line, never a guess.
func ParseISC(r io.Reader, now time.Time) (map[string]Lease, error) {
	// Sizing the maps from the input size, when it is known, saves rehashing them as they
	// grow; dhcpd writes 200 to 400 bytes per lease.
	hint := sizeHint(r) / 300
	p := iscParser{
		recs:    make([]iscRecord, 0, hint),
		byMAC:   make(map[uint64]int32, hint),
		lastSeq: make(map[uint32]int, hint),
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxLineLength)
	for sc.Scan() {
		p.line++
		if err := p.parseLine(sc.Bytes()); err != nil {
			return nil, fmt.Errorf("line %d: %w", p.line, err)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d: longer than %d bytes: not a leases file", p.line+1, maxLineLength)
		}
		return nil, err
	}
	if err := p.atEOF(); err != nil {
		return nil, err
	}
	return p.result(now.Unix()), nil
}

// result builds the map of current leases. The leases' strings are cut from one string
// and their expiry times from one slice: two allocations rather than four per lease, which
// on a 100,000-lease file is a quarter of the run time.
func (p *iscParser) result(now int64) map[string]Lease {
	var cur []int
	size, timed := 0, 0
	for i := range p.recs {
		rec := &p.recs[i]
		if !rec.active || p.lastSeq[rec.ip] != rec.seq || (!rec.never && (!rec.hasEnds || rec.ends <= now)) {
			continue
		}
		cur = append(cur, i)
		size += 17 + 15 + rec.nameLen
		if !rec.never {
			timed++
		}
	}
	buf := make([]byte, 0, size)
	ends := make([]int, len(cur)*3) // end offsets in buf of each lease's MAC, IP and hostname
	for j, i := range cur {
		rec := &p.recs[i]
		buf = appendMAC(buf, rec.mac)
		ends[3*j] = len(buf)
		buf = appendIPv4(buf, rec.ip)
		ends[3*j+1] = len(buf)
		buf = append(buf, p.names[rec.nameOff:rec.nameOff+rec.nameLen]...)
		ends[3*j+2] = len(buf)
	}
	all := string(buf)
	times := make([]time.Time, 0, timed) // never grows, so the pointers into it stay valid
	out := make(map[string]Lease, len(cur))
	start := 0
	for j, i := range cur {
		rec := &p.recs[i]
		l := Lease{MAC: all[start:ends[3*j]], IP: all[ends[3*j]:ends[3*j+1]], Hostname: all[ends[3*j+1]:ends[3*j+2]]}
		start = ends[3*j+2]
		if !rec.never {
			times = append(times, time.Unix(rec.ends, 0).UTC())
			l.Expires = &times[len(times)-1]
		}
		out[l.MAC] = l
	}
	return out
}

// Token kinds.
const (
	tokWord   = 'w'
	tokString = 's'
)

type token struct {
	kind byte
	text []byte
}

// iscRecord is the last block seen for one MAC. Addresses are kept as integers until the
// end: on a 100,000-lease file, map operations on string keys cost more than the parsing.
type iscRecord struct {
	mac     uint64
	ip      uint32
	nameOff int // the client-hostname, in iscParser.names
	nameLen int
	ends    int64 // Unix seconds
	active  bool
	hasEnds bool
	never   bool
	seq     int
}

type iscParser struct {
	line int
	// toks is the statement being read, if it is one we need (see wanted); skip says it is
	// not, and pending that it has begun. Token texts point into the scanner's buffer, which
	// the next line overwrites, so the rare statement that spans lines is copied (owned
	// counts the tokens already copied).
	toks     []token
	owned    int
	skip     bool
	pending  bool
	stmtLine int // where the pending statement began
	// depth is the brace depth; inLease says the depth-1 block is a lease.
	depth     int
	inLease   bool
	blockLine int // where the open top-level block started, for EOF errors
	cur       iscRecord
	curMAC    uint64
	hasMAC    bool
	seq       int
	recs      []iscRecord      // the last block of each MAC, in order of first appearance
	names     []byte           // every client-hostname, unquoted
	byMAC     map[uint64]int32 // MAC -> index in recs
	lastSeq   map[uint32]int   // IP -> seq of the last block for it
}

// Character classes of the tokenizer, looked up in a table: this loop sees every byte.
const (
	clsWord  = iota // part of a word
	clsSpace        // blanks
	clsHash         // a comment to the end of the line
	clsQuote        // a string
	clsPunct        // ; { }
)

var class = func() (t [256]uint8) {
	for _, c := range []byte(" \t\r\n\v\f") {
		t[c] = clsSpace
	}
	t['#'], t['"'] = clsHash, clsQuote
	t[';'], t['{'], t['}'] = clsPunct, clsPunct, clsPunct
	return t
}()

func (p *iscParser) parseLine(line []byte) error {
	for i := 0; i < len(line); {
		if p.skip {
			// Most statements are of no interest (starts, cltt, uid, next binding state, ...):
			// run to the next character that can end one.
			for i < len(line) && class[line[i]] <= clsSpace {
				i++
			}
			if i == len(line) {
				break
			}
		}
		switch class[line[i]] {
		case clsSpace:
			i++
		case clsHash:
			i = len(line)
		case clsPunct:
			if err := p.punct(line[i]); err != nil {
				return err
			}
			i++
		case clsQuote:
			j := i + 1
			for ; j < len(line) && line[j] != '"'; j++ {
				if line[j] == '\\' {
					j++ // skip the escaped character
				}
			}
			if j >= len(line) {
				return errors.New("unterminated string")
			}
			p.word(tokString, line[i+1:j])
			i = j + 1
		default:
			j := i + 1
			for j < len(line) && class[line[j]] == clsWord {
				j++
			}
			p.word(tokWord, line[i:j])
			i = j
		}
	}
	// Keep a statement that continues on the next line.
	for ; p.owned < len(p.toks); p.owned++ {
		p.toks[p.owned].text = bytes.Clone(p.toks[p.owned].text)
	}
	return nil
}

// word adds a token to the statement being read. The statement's first word says whether
// it is one we need; if not, the rest of it is skipped without being tokenized.
func (p *iscParser) word(kind byte, text []byte) {
	if !p.pending {
		p.stmtLine = p.line
	}
	p.pending = true
	if p.skip {
		return
	}
	if len(p.toks) == 0 && !p.wanted(kind, text) {
		p.skip = true
		return
	}
	p.toks = append(p.toks, token{kind: kind, text: text})
}

// wanted says which statements are read: `lease` at the top level, and in a lease the
// statements that decide it.
func (p *iscParser) wanted(kind byte, first []byte) bool {
	if kind != tokWord {
		return false
	}
	switch {
	case p.depth == 0:
		return string(first) == "lease"
	case p.depth == 1 && p.inLease:
		switch string(first) {
		case "ends", "binding", "abandoned", "hardware", "client-hostname":
			return true
		}
	}
	return false
}

func (p *iscParser) punct(c byte) error {
	toks, pending := p.toks, p.pending
	p.toks, p.owned, p.skip, p.pending = p.toks[:0], 0, false, false
	switch c {
	case ';':
		if p.inLease && p.depth == 1 && len(toks) > 0 {
			return p.leaseStatement(toks)
		}
		return nil
	case '{':
		p.depth++
		if p.depth == 1 {
			p.blockLine = p.line
			if len(toks) > 0 {
				return p.openLease(toks)
			}
		}
		return nil
	default: // '}'
		if pending {
			return errors.New("missing ';' before '}'")
		}
		if p.depth == 0 {
			return errors.New("unexpected '}'")
		}
		p.depth--
		if p.depth == 0 && p.inLease {
			p.closeLease()
		}
		return nil
	}
}

func (p *iscParser) openLease(toks []token) error {
	if len(toks) != 2 || toks[1].kind != tokWord {
		return errors.New("want `lease <IPv4 address> {`")
	}
	ip, ok := parseIPv4(toks[1].text)
	if !ok {
		return errors.New("lease: the address is not an IPv4 address; want `lease <IPv4 address> {`")
	}
	p.inLease = true
	p.cur = iscRecord{ip: ip}
	p.hasMAC = false
	return nil
}

func (p *iscParser) closeLease() {
	p.inLease = false
	p.seq++
	p.cur.seq = p.seq
	p.lastSeq[p.cur.ip] = p.seq
	if !p.hasMAC {
		return
	}
	p.cur.mac = p.curMAC
	if i, seen := p.byMAC[p.curMAC]; seen {
		p.recs[i] = p.cur
		return
	}
	p.byMAC[p.curMAC] = int32(len(p.recs))
	p.recs = append(p.recs, p.cur)
}

func (p *iscParser) atEOF() error {
	if p.pending {
		return fmt.Errorf("line %d: file ends inside the statement begun at line %d (no ';'): is this a dhcpd.leases file?", p.line, p.stmtLine)
	}
	if p.depth > 0 {
		return fmt.Errorf("line %d: file ends inside the block opened at line %d", p.line, p.blockLine)
	}
	return nil
}

// leaseStatement reads the statements of a lease block we need; the others are skipped.
func (p *iscParser) leaseStatement(toks []token) error {
	if len(toks) == 0 || toks[0].kind != tokWord {
		return nil
	}
	switch string(toks[0].text) {
	case "ends":
		return p.ends(toks[1:])
	case "binding":
		if len(toks) == 3 && string(toks[1].text) == "state" {
			p.cur.active = string(toks[2].text) == "active"
		}
	case "abandoned": // dhcpd 2.x's way of saying binding state abandoned
		p.cur.active = false
	case "hardware":
		// Only Ethernet addresses can match a NIC's MAC; other types are left without.
		if len(toks) == 3 && string(toks[1].text) == "ethernet" {
			if mac, ok := parseMAC(toks[2].text); ok {
				p.curMAC, p.hasMAC = mac, true
			}
		}
	case "client-hostname":
		if len(toks) == 2 && toks[1].kind == tokString {
			p.cur.nameOff = len(p.names)
			p.names = appendUnquoted(p.names, toks[1].text)
			p.cur.nameLen = len(p.names) - p.cur.nameOff
		}
	}
	return nil
}

// ends reads `ends never`, `ends epoch <seconds>` (db-time-format local) or
// `ends <weekday> <yyyy/mm/dd> <hh:mm:ss>` (UTC, the default).
func (p *iscParser) ends(args []token) error {
	p.cur.hasEnds, p.cur.never = false, false
	switch {
	case len(args) == 1 && string(args[0].text) == "never":
		p.cur.never = true
		return nil
	case len(args) == 2 && string(args[0].text) == "epoch":
		sec, err := strconv.ParseInt(string(args[1].text), 10, 64)
		if err != nil || sec < 0 || sec > 1<<40 {
			return errors.New("ends epoch: want a number of seconds since 1970")
		}
		p.cur.ends, p.cur.hasEnds = sec, true
		return nil
	case len(args) == 3:
		t, ok := parseISCTime(args[1].text, args[2].text)
		if !ok {
			return errors.New("ends: the date or time is not a valid `<weekday> <yyyy/mm/dd> <hh:mm:ss>`")
		}
		p.cur.ends, p.cur.hasEnds = t, true
		return nil
	}
	return errors.New("ends: want `never`, `epoch <seconds>` or `<weekday> <yyyy/mm/dd> <hh:mm:ss>`")
}

// parseISCTime reads "2019/08/08" "23:52:49" (UTC) as Unix seconds, by hand: time.Parse
// would be a quarter of the cost of parsing a large file.
func parseISCTime(date, clock []byte) (int64, bool) {
	d, ok := splitNums(date, '/')
	if !ok {
		return 0, false
	}
	c, ok := splitNums(clock, ':')
	if !ok {
		return 0, false
	}
	if d[0] < 1970 || d[0] > 9999 || d[1] < 1 || d[1] > 12 || d[2] < 1 || d[2] > 31 ||
		c[0] > 23 || c[1] > 59 || c[2] > 60 {
		return 0, false
	}
	return daysFromCivil(d[0], d[1], d[2])*86400 + int64(c[0]*3600+c[1]*60+c[2]), true
}

// daysFromCivil counts days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
// (Howard Hinnant's algorithm). Like time.Date it rolls 2019/02/31 over into March.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400 // y ≥ 1969 here, so no negative division
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// splitNums reads exactly three sep-separated decimal numbers of 1 to 4 digits.
func splitNums(b []byte, sep byte) ([3]int, bool) {
	var out [3]int
	n, digits := 0, 0
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			if digits == 4 {
				return out, false
			}
			out[n] = out[n]*10 + int(c-'0')
			digits++
		case c == sep && digits > 0 && n < 2:
			n++
			digits = 0
		default:
			return out, false
		}
	}
	return out, n == 2 && digits > 0
}

// appendUnquoted undoes dhcpd's string escapes (\" \\ and \ooo octal for unprintable
// bytes) and appends the result to out.
func appendUnquoted(out, b []byte) []byte {
	if bytes.IndexByte(b, '\\') < 0 {
		return append(out, b...)
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 == len(b) {
			out = append(out, b[i])
			continue
		}
		i++
		if i+2 < len(b) && isOctal(b[i]) && isOctal(b[i+1]) && isOctal(b[i+2]) {
			out = append(out, (b[i]-'0')<<6|(b[i+1]-'0')<<3|(b[i+2]-'0'))
			i += 2
			continue
		}
		out = append(out, b[i])
	}
	return out
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
