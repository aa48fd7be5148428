// Package transform re-keys cells: it holds the key layout language, the
// presets built from it (wide -> bucketed wide, tall -> wide, salt, re-key),
// entity extraction for verification, and the Go interface for transforms
// that YAML cannot express. It does no I/O; the job-file loader lives in
// package job.
//
// # Layouts
//
// A layout is a list of components. Each component has a type that fixes its
// byte form and therefore its sort order. Parsing a key walks the components
// left to right and stores each one's value in a named field; building a key
// walks them again and encodes the fields. The same layout does both, so a
// new key can be parsed back (entity extraction from the target table).
//
//	type          bytes                          field kind  sorts like the value
//	uint          width 1,2,4,8; big-endian      number      yes
//	int           width 1,2,4,8; two's complement number      no: negatives sort last
//	              (Java Bytes.toBytes)
//	sortable_int  width 1,2,4,8; sign bit flipped number      yes
//	reversed_ts   8; Long.MAX_VALUE - ts          number      newest first
//	fixed         width N; padded with pad        bytes       yes (pad 0x00)
//	string        bytes, then sep; or the rest    bytes       see below
//	              of the key when last and no sep
//	decimal       width N: zero-padded digits     number      yes with width
//	              no width: digits, then sep                  no: "10" < "9"
//	literal       the given bytes                 (none)
//	salt          width 1 or 2: bucket number     number      (spreads writes)
//	time_bucket   8-byte start millis, or ISO     number      yes
//	              text (day, hour, seconds)
//	offset        width 4 or 8: millis since the  number      yes within a bucket
//	              start of a time_bucket
//
// Strings with a separator either refuse values that contain it (the
// default) or escape it: with escape, a separator byte inside the value is
// written sep,0xFF and the end is written sep,0x00, which keeps byte order
// equal to string order. Without escape, the order of two strings where one
// is a prefix of the other is kept only when sep is 0x00 (plan warns
// otherwise). A fixed string refuses values longer than its width and
// values that end with the pad byte (they could not be told apart when read
// back).
//
// The salt of a key is FNV-1a (32 bit) over the salted fields, each encoded
// as its bytes (bytes fields) or 8 big-endian bytes (number fields), with a
// 0x00 byte between fields; the bucket is that hash modulo the bucket count.
// This never changes between releases: a salted table written today must be
// readable by a later rekey.
//
// Time buckets floor a millisecond timestamp to the hour, the day (UTC) or N
// seconds. An offset component stores the millis of the timestamp past the
// start of its bucket, so the timestamp can be rebuilt from the new key.
//
// Besides the fields a layout parses, four built-in fields come from the
// cell itself: $row, $family, $qualifier (bytes) and $ts (number).
//
// # Reading new keys back
//
// When the new key keeps every old field (Program.Invertible; a field kept
// only as a salt or a time bucket is not kept), Rekey.Unmap reads a new
// cell back to the old cell it was made from: the new key parsed under the
// target layout, the old key built under the source layout, the family
// renamed back. It never runs the forward mapping, and it checks what the
// new key derives: salts (recomputed with hash/fnv), time buckets against
// their timestamp, ISO text against package time, a field held twice.
// Verification compares its result with the old cells as they are.
//
// # Transforms
//
// A Mapper maps one source cell to zero or more target cells. Compile turns a
// Spec (two layouts, a family mapping and the entity fields) into a Program,
// which is immutable and shared; each worker calls Program.New for a Rekey,
// which reuses its buffers, so mapping a cell allocates nothing. Cells given
// to emit are valid until the next call to Map.
package transform
