package cell

import (
	"encoding/hex"
	"strconv"
)

// AppendDump appends c as one line of the canonical dump format shared by
// the Java oracle and `rekey inspect`, newline included:
//
//	rowhex \t family \t qualifierhex \t timestamp \t type \t valuehex
//
// Hex is lowercase; the family is written as text because HBase restricts
// family names to printable characters.
func AppendDump(dst []byte, c *Cell) []byte {
	dst = hex.AppendEncode(dst, c.Row)
	dst = append(dst, '\t')
	dst = append(dst, c.Family...)
	dst = append(dst, '\t')
	dst = hex.AppendEncode(dst, c.Qualifier)
	dst = append(dst, '\t')
	dst = strconv.AppendInt(dst, c.Timestamp, 10)
	dst = append(dst, '\t')
	dst = append(dst, c.Type.String()...)
	dst = append(dst, '\t')
	dst = hex.AppendEncode(dst, c.Value)
	return append(dst, '\n')
}
