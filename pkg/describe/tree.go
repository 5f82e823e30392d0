package describe

import (
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// style is an ANSI SGR parameter ("" for none).
type style string

const (
	plain  style = ""
	bold   style = "1"
	dim    style = "2"
	red    style = "31"
	green  style = "32"
	yellow style = "33"
	cyan   style = "36"
)

type cell struct {
	text  string
	style style
}

// node is one line of the tree: its columns (the first is the name) and the lines under it.
type node struct {
	cols     []cell
	children []*node
}

func (n *node) add(cols ...cell) *node {
	c := &node{cols: cols}
	n.children = append(n.children, c)
	return c
}

// write prints n's children (n itself is the header, printed by the caller) as a tree.
// Siblings of the same shape (number of columns) share column widths, so a section
// reads as a table; widths are counted on the plain text, so colour does not skew them.
func (n *node) write(w io.Writer, indent string, color bool) {
	widths := map[int][]int{}
	for _, c := range n.children {
		ws := widths[len(c.cols)]
		if ws == nil {
			ws = make([]int, len(c.cols))
			widths[len(c.cols)] = ws
		}
		for i, col := range c.cols {
			ws[i] = max(ws[i], utf8.RuneCountInString(col.text))
		}
	}
	for i, c := range n.children {
		branch, next := "├─", "│ "
		if i == len(n.children)-1 {
			branch, next = "└─", "  "
		}
		var b strings.Builder
		b.WriteString(indent + branch)
		for j, col := range c.cols {
			if col.text == "" && j == len(c.cols)-1 {
				break
			}
			if j > 0 {
				b.WriteString("  ")
			}
			b.WriteString(paint(col, color))
			if j < len(c.cols)-1 { // the last column is never padded
				b.WriteString(strings.Repeat(" ", widths[len(c.cols)][j]-utf8.RuneCountInString(col.text)))
			}
		}
		_, _ = io.WriteString(w, strings.TrimRight(b.String(), " ")+"\n")
		c.write(w, indent+next, color)
	}
}

func paint(c cell, color bool) string {
	if !color || c.style == plain || c.text == "" {
		return c.text
	}
	return "\x1b[" + string(c.style) + "m" + c.text + "\x1b[0m"
}

// clean makes API text safe and one line: messages come from hosts, step pods and CR
// authors, and an escape sequence in one must not drive the reader's terminal (retitle
// it, rewrite earlier lines, plant a link), nor a bidi control reorder what is shown.
// Runs of white space become one space; other control and format characters are shown
// escaped, as Go would quote them.
func clean(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if strings.IndexFunc(s, unsafeRune) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r) {
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Clean is clean for other commands' output of untrusted text (`bpa artifacts ls`).
func Clean(s string) string { return clean(s) }

func unsafeRune(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}
