package dynamo

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/audit"
)

// Checkpoint item (audit table), in the tenant's partition beside its
// records:
//
//	pk <tenant>  sk cp#<time, audit.SortTimeLayout>#<writer>#<number>
//	writer, number, time (RFC 3339), note; ttl = time + AuditRetention
//
// "cp#" sorts after every record's sort key (which starts with a digit),
// so a record query's sk range never reads a checkpoint, and checkpoints
// are one key range by time. Writes are conditional: a new sk, or the
// same note again (a retried write that landed), never an overwrite.
const checkpointPrefix = "cp#"

func checkpointSK(c audit.Checkpoint) string {
	return checkpointPrefix + c.Time.UTC().Format(audit.SortTimeLayout) + "#" + KeyPart(c.Writer) + "#" + strconv.FormatUint(c.Number, 10)
}

// PutCheckpoint implements audit.CheckpointStore.
func (s *Store) PutCheckpoint(ctx context.Context, tenant string, c audit.Checkpoint) error {
	switch {
	case tenant == "" || c.Writer == "" || c.Number == 0 || c.Time.IsZero():
		return errors.New("dynamo: checkpoint without tenant, writer, number or time")
	case len(c.Note) > audit.MaxNoteBytes:
		return errors.New("dynamo: checkpoint note too long")
	}
	it := Key(tenant, checkpointSK(c))
	it[AttrTTL] = TTL(c.Time.Add(s.opt.AuditRetention))
	it["writer"] = S(c.Writer)
	it["number"] = &types.AttributeValueMemberN{Value: strconv.FormatUint(c.Number, 10)}
	it["time"] = S(c.Time.UTC().Format(time.RFC3339Nano))
	it["note"] = S(c.Note)
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.tables.Audit),
		Item:                      it,
		ConditionExpression:       aws.String("attribute_not_exists(sk) OR note = :note"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":note": S(c.Note)},
	})
	if err = mapErr("audit PutCheckpoint", err); isConflict(err) {
		return audit.ErrCheckpointConflict
	}
	return err
}

// QueryCheckpoints implements audit.CheckpointStore. Checkpoints are in
// the tenant's first shard (pk <tenant>) only; the cursor is
// queryAudit's.
func (s *Store) QueryCheckpoints(ctx context.Context, q audit.Query) ([]audit.Checkpoint, string, error) {
	return queryAudit(ctx, s, q, checkpointPrefix, 1, "audit QueryCheckpoints", func(it Item) (audit.Checkpoint, time.Time) {
		t, _ := time.Parse(time.RFC3339Nano, GetS(it, "time"))
		var n uint64
		if v, ok := it["number"].(*types.AttributeValueMemberN); ok {
			n, _ = strconv.ParseUint(v.Value, 10, 64)
		}
		return audit.Checkpoint{Writer: GetS(it, "writer"), Number: n, Time: t, Note: GetS(it, "note")}, t
	})
}

// KeptSince implements audit.CheckpointStore: the retention horizon
// (reads filter out what is past it, collected by TTL or not).
func (s *Store) KeptSince(_ context.Context, _ string) (time.Time, error) {
	return s.opt.Now().Add(-s.opt.AuditRetention), nil
}

var _ audit.CheckpointStore = (*Store)(nil)
