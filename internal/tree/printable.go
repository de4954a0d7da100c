package tree

import (
	"strings"
	"unicode"
)

// Printable is text from outside (a status message a controller or a registry wrote) as it may reach a terminal:
// on one line, with no control or format characters, so that it can neither move the cursor, ring, change the
// terminal's state nor reorder what follows it (a right-to-left override), nor break a table's rows.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case !unicode.IsPrint(r):
			return -1
		}
		return r
	}, s)
}
