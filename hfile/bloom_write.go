package hfile

import "github.com/rekeyhq/rekey/cell"

// bloomWriter builds a compound bloom filter while cells are appended.
type bloomWriter struct {
	keys    int64
	lastKey []byte
}

func newBloomWriter(t BloomType) *bloomWriter { return &bloomWriter{} }

func (b *bloomWriter) add(c *cell.Cell, first bool, w *Writer) {}

func (b *bloomWriter) flushChunks(w *Writer, closing bool) error { return nil }

func (b *bloomWriter) appendMeta(dst []byte) []byte { return dst }
