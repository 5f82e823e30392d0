package artifacts

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz/lzma"
)

// Bounds on what publishing a .deb reads, so a hostile one cannot exhaust memory or CPU.
// Debian's largest control archives (md5sums of tens of thousands of files) are a few MiB.
const (
	maxControlMember = 16 << 20 // control.tar.* as stored in the ar archive
	maxControlTar    = 64 << 20 // control.tar read, uncompressed, up to ./control
	maxControlFile   = 1 << 20  // ./control
	maxDict          = 64 << 20 // xz dictionary, zstd window: what xz -9 and zstd -19 use
	maxLeadMembers   = 8        // members before control.tar (debian-binary, _-prefixed ones)
)

// ControlField is one field of a Debian package's control file, in file order. Value
// holds continuation lines after "\n", as written (each starting with a space or tab).
type ControlField struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

var (
	controlName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*$`)
	// required are the fields apt needs to know a package, with the values Debian allows.
	required = []struct {
		name  string
		value *regexp.Regexp
	}{
		{"Package", regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)},
		{"Version", regexp.MustCompile(`^[A-Za-z0-9.+~:-]+$`)},
		{"Architecture", regexp.MustCompile(`^[a-z0-9-]+$`)},
	}
)

// debControl reads the control file of the Debian package in file: an ar archive of
// debian-binary ("2.x"), then control.tar[.gz|.xz|.zst] holding ./control.
func debControl(file string) ([]ControlField, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	magic := make([]byte, 8)
	if _, err := f.ReadAt(magic, 0); err != nil || string(magic) != "!<arch>\n" {
		return nil, errors.New("not an ar archive (a .deb starts with !<arch>)")
	}
	off := int64(len(magic))
	for i := range maxLeadMembers {
		h := make([]byte, 60)
		if _, err := f.ReadAt(h, off); err != nil {
			return nil, errors.New("ar archive ends before control.tar")
		}
		name := strings.TrimSuffix(strings.TrimRight(string(h[:16]), " "), "/")
		size, err := strconv.ParseInt(strings.TrimRight(string(h[48:58]), " "), 10, 64)
		if string(h[58:]) != "`\n" || err != nil || size < 0 || off+60+size > st.Size() {
			return nil, fmt.Errorf("ar member %d (%q): bad header or truncated", i+1, name)
		}
		body := io.NewSectionReader(f, off+60, size)
		off += 60 + size + size%2
		switch {
		case i == 0:
			v, err := io.ReadAll(io.LimitReader(body, 16))
			if name != "debian-binary" || size > 16 || err != nil || !strings.HasPrefix(string(v), "2.") || !strings.HasSuffix(string(v), "\n") {
				return nil, fmt.Errorf("first ar member: want debian-binary holding format 2.x, got %q", name)
			}
		case strings.HasPrefix(name, "_"): // dpkg ignores these too
		case strings.HasPrefix(name, "control.tar"):
			if size > maxControlMember {
				return nil, fmt.Errorf("%s: %d bytes, more than the %d a control archive may have", name, size, maxControlMember)
			}
			return controlFromTar(name, body)
		default:
			return nil, fmt.Errorf("ar member %q where control.tar[.gz|.xz|.zst] was expected", name)
		}
	}
	return nil, fmt.Errorf("no control.tar in the first %d ar members", maxLeadMembers)
}

// controlFromTar decompresses the control archive member and parses its ./control.
func controlFromTar(member string, r io.Reader) ([]ControlField, error) {
	var err error
	switch strings.TrimPrefix(member, "control.tar") {
	case "":
	case ".gz":
		r, err = gzip.NewReader(r)
	case ".xz":
		r, err = newXZReader(r)
	case ".zst":
		var d *zstd.Decoder
		d, err = zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(maxDict), zstd.WithDecoderMaxMemory(maxDict))
		if err == nil {
			defer d.Close()
			r = d
		}
	default:
		return nil, fmt.Errorf("%s: unknown compression (want control.tar, .gz, .xz or .zst)", member)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", member, err)
	}
	tr := tar.NewReader(io.LimitReader(r, maxControlTar))
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: no ./control in its first %d bytes: %v", member, maxControlTar, err)
		}
		if h.Name != "./control" && h.Name != "control" {
			continue
		}
		if h.Typeflag != tar.TypeReg || h.Size > maxControlFile {
			return nil, fmt.Errorf("%s: ./control is not a regular file of at most %d bytes", member, maxControlFile)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: ./control: %w", member, err)
		}
		return parseControl(b)
	}
}

// parseControl parses a control file's one paragraph. Its text goes into the repository's
// index as it is, so whatever could end a field or paragraph there early is refused
// rather than rewritten: a blank or whitespace-only line (Debian writes an empty line of
// a description as " ."), a control character (CR among them), a malformed field name,
// a field given twice.
func parseControl(b []byte) ([]ControlField, error) {
	text := strings.TrimRight(string(b), "\n")
	var fields []ControlField
	seen := map[string]bool{}
	for i, l := range strings.Split(text, "\n") {
		if j := strings.IndexFunc(l, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }); j >= 0 {
			return nil, fmt.Errorf("control file line %d: control character %q", i+1, l[j])
		}
		switch {
		case l == "":
			return nil, fmt.Errorf("control file line %d: blank line before the end: a package's control file is one paragraph", i+1)
		case l[0] == ' ' || l[0] == '\t':
			if len(fields) == 0 || strings.TrimSpace(l) == "" {
				return nil, fmt.Errorf("control file line %d: a continuation line must follow a field and hold more than white space (an empty line is written \" .\")", i+1)
			}
			fields[len(fields)-1].Value += "\n" + l
		default:
			name, value, ok := strings.Cut(l, ":")
			if !ok || !controlName.MatchString(name) {
				return nil, fmt.Errorf("control file line %d: want Name: value, the name matching %s", i+1, controlName)
			}
			if seen[strings.ToLower(name)] {
				return nil, fmt.Errorf("control file line %d: field %s given twice", i+1, name)
			}
			seen[strings.ToLower(name)] = true
			fields = append(fields, ControlField{Name: name, Value: strings.TrimSpace(value)})
		}
	}
	for _, want := range required {
		if v, ok := controlValue(fields, want.name); !ok || !want.value.MatchString(v) {
			return nil, fmt.Errorf("control file: field %s: must be present and match %s", want.name, want.value)
		}
	}
	return fields, nil
}

// controlValue is the value of the field named name, whatever its case.
func controlValue(fields []ControlField, name string) (string, bool) {
	for _, f := range fields {
		if strings.EqualFold(f.Name, name) {
			return f.Value, true
		}
	}
	return "", false
}

// xzReader reads an xz stream (control.tar.xz) block by block with an LZMA2 reader each,
// refusing a block whose header asks for a dictionary larger than maxDict: the xz
// package's own reader allocates whatever a header asks for, up to 4 GiB. It stops at the
// index, unchecked, as the tar inside is parsed for one file and trusted no further.
type xzReader struct {
	r     *countingReader
	check int64 // bytes of the check that follows each block
	block io.Reader
}

type countingReader struct {
	*bufio.Reader // an io.ByteReader, so LZMA2 reads no further than its end marker
	n             int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.Reader.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.Reader.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

func newXZReader(r io.Reader) (*xzReader, error) {
	x := &xzReader{r: &countingReader{Reader: bufio.NewReader(r)}}
	h := make([]byte, 12)
	if _, err := io.ReadFull(x.r, h); err != nil || string(h[:6]) != "\xfd7zXZ\x00" || h[6] != 0 || h[7] > 0x0f {
		return nil, errors.New("not an xz stream")
	}
	if t := h[7]; t > 0 {
		x.check = 4 << ((t - 1) / 3) // CRC32, CRC64, SHA-256 and their reserved neighbours
	}
	return x, nil
}

func (x *xzReader) Read(p []byte) (int, error) {
	for {
		if x.block == nil {
			if err := x.nextBlock(); err != nil {
				return 0, err
			}
		}
		n, err := x.block.Read(p)
		if err == io.EOF {
			x.block = nil
			// The block's compressed data is padded to 4 bytes, then its check follows.
			if _, err := x.r.Discard(int((-x.r.n)&3 + x.check)); err != nil {
				return n, io.ErrUnexpectedEOF
			}
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

// nextBlock parses a block header (xz format 3.1.1) and starts its LZMA2 reader.
func (x *xzReader) nextBlock() error {
	size, err := x.r.ReadByte()
	if err != nil {
		return io.ErrUnexpectedEOF
	} else if size == 0 {
		return io.EOF // the index: no more blocks
	}
	h := make([]byte, int(size)*4+3) // the header after its size byte, CRC32 last
	if _, err := io.ReadFull(x.r, h); err != nil {
		return io.ErrUnexpectedEOF
	}
	flags, rest := h[0], h[1:len(h)-4]
	if flags&0x3c != 0 || flags&0x03 != 0 {
		return errors.New("xz: block with reserved flags or more than one filter (only LZMA2 is supported)")
	}
	for _, present := range []bool{flags&0x40 != 0, flags&0x80 != 0} { // compressed, uncompressed size
		if present {
			if rest = skipVarint(rest); rest == nil {
				return errors.New("xz: bad block header")
			}
		}
	}
	// LZMA2 (filter ID 0x21) with one byte of properties: the dictionary size.
	if len(rest) < 3 || rest[0] != 0x21 || rest[1] != 1 || rest[2] > 40 {
		return errors.New("xz: block filter is not LZMA2")
	}
	dict := int64(2|rest[2]&1) << (rest[2]/2 + 11)
	if dict > maxDict {
		return fmt.Errorf("xz: block asks for a %d-byte dictionary, more than %d", dict, maxDict)
	}
	x.r.n = 0
	x.block, err = lzma.Reader2Config{DictCap: int(max(dict, lzma.MinDictCap))}.NewReader2(x.r)
	return err
}

// skipVarint returns b after the xz multibyte integer it starts with, or nil.
func skipVarint(b []byte) []byte {
	for i := 0; i < len(b) && i < 9; i++ {
		if b[i]&0x80 == 0 {
			return b[i+1:]
		}
	}
	return nil
}
