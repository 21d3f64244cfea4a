package audit

import (
	"context"
	"errors"
	"time"
)

// ErrCheckpointConflict is PutCheckpoint's error for a writer and number
// already stored with another note.
var ErrCheckpointConflict = errors.New("audit: a checkpoint with this writer and number exists with another note")

// Checkpoint is a signed checkpoint of one writer's chain as the stores
// keep it: the indexing fields and the signed note itself, which only
// shared/auditchain reads. Stores keep it beside the tenant's records,
// with the same retention, and never change it.
type Checkpoint struct {
	Writer string    `json:"writer"`
	Number uint64    `json:"number"` // from 1, per writer
	Time   time.Time `json:"time"`   // when it was signed
	Note   string    `json:"note"`   // the signed note (C2SP signed-note)
}

// MaxNoteBytes bounds a checkpoint's note; stores refuse a longer one.
const MaxNoteBytes = 16 << 10

// CheckpointStore keeps checkpoints. PutCheckpoint writes c once: writing
// the same checkpoint (writer and number) again with the same note is not
// an error, with another note it is (ErrCheckpointConflict).
// QueryCheckpoints reads a tenant's checkpoints whose Time is in
// [q.From, q.To), oldest first, in pages like Reader.Query.
// KeptSince is the time from which the store still holds every record
// and checkpoint of the tenant that was written: its retention horizon
// (and, for the embedded store, the newest record its bound dropped).
type CheckpointStore interface {
	PutCheckpoint(ctx context.Context, tenant string, c Checkpoint) error
	QueryCheckpoints(ctx context.Context, q Query) (cps []Checkpoint, next string, err error)
	KeptSince(ctx context.Context, tenant string) (time.Time, error)
}
