package audit

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/aegis-gw/aegis/shared/timefmt"
)

// SortTimeLayout is the fixed-width UTC time layout that both stores put at
// the front of a record's sort key, so that byte order is time order and a
// [From, To) range is one key-range read.
// timefmt.AppendSortTime writes it per record.
const SortTimeLayout = timefmt.SortLayout

// Page sizes of Query.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// PageSize is the page size a Reader uses for a requested limit.
func PageSize(limit int) int {
	switch {
	case limit <= 0:
		return DefaultPageSize
	case limit > MaxPageSize:
		return MaxPageSize
	}
	return limit
}

// ErrBadCursor is returned by Query for a cursor it did not issue.
var ErrBadCursor = errors.New("audit: bad cursor")

// JSONWriter writes each record as one line of JSON: the form of a record in
// logs and in the golden files (testdata/). It is safe for concurrent use.
type JSONWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewJSONWriter returns a writer of JSON lines to w.
func NewJSONWriter(w io.Writer) *JSONWriter { return &JSONWriter{w: w} }

// Encode returns r as the writer writes it, without the newline: Bounded,
// its long fields cut with a marker.
func Encode(r Record) ([]byte, error) {
	r = r.Bounded()
	r.Time = r.Time.UTC()
	return json.Marshal(r)
}

// Write implements Writer. It writes only a record that passes Validate.
func (j *JSONWriter) Write(_ context.Context, r Record) error {
	if err := r.Validate(); err != nil {
		return err
	}
	b, err := Encode(r)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, err = j.w.Write(append(b, '\n'))
	return err
}

var _ Writer = (*JSONWriter)(nil)
