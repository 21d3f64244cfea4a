package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/audit"
)

// Audit item (audit table), one per record, every field its own attribute
// so the table reads well in the console:
//
//	pk <tenant> or <tenant>#<shard>  sk <time, audit.SortTimeLayout>#<correlation id>#<8 random hex>
//	ttl = time + AuditRetention
//
// A tenant's records are spread over AuditShards partitions by the first
// digit of their random suffix (shard 0's pk is the tenant's name, as every
// record's was before), so one tenant's records are not one partition's
// write limit (docs/design/dynamodb.md). Query reads every shard by sk
// BETWEEN from AND to (the range is [From, To) because every sk extends its
// time with '#...'), with the filter ttl > now, and merges them by sort key:
// an expired record is never returned, collected or not.
// Writes are conditional on attribute_not_exists(sk) (a record is written
// once; a collision of the random suffix is an error, never an overwrite).

// AuditItem is r as the audit table stores it (also the golden-file form):
// r.Bounded(), its long fields cut with a marker, so that no record nears
// DynamoDB's 400 KB item limit.
func AuditItem(r audit.Record, retention time.Duration, suffix string) Item {
	r = r.Bounded()
	r.Time = r.Time.UTC()
	it := Key(auditPK(r.Tenant, auditShard(suffix)), r.Time.Format(audit.SortTimeLayout)+"#"+KeyPart(r.CorrelationID)+"#"+suffix)
	it[AttrTTL] = TTL(r.Time.Add(retention))
	it["time"] = S(r.Time.Format(time.RFC3339Nano))
	it["tenant"] = S(r.Tenant)
	str := func(name, v string) {
		if v != "" {
			it[name] = S(v)
		}
	}
	str("caller", r.Caller)
	str("session", r.Session)
	str("correlation_id", r.CorrelationID)
	str("layer", r.Layer)
	str("method", r.Method)
	str("server", r.Server)
	str("tool", r.Tool)
	str("params_hash", r.ParamsHash)
	it["code"] = N(int64(r.Code))
	str("word", r.Word)
	str("slot", r.Slot)
	str("outcome", string(r.Outcome))
	it["latency_ms"] = &types.AttributeValueMemberN{Value: strconv.FormatFloat(r.LatencyMs, 'f', -1, 64)}
	str("policy_hash", r.PolicyHash)
	str("detail", r.Detail)
	str("policy_verdict", r.PolicyVerdict)
	str("policy_rule", r.PolicyRule)
	str("connection", r.Connection)
	if r.PolicyAudit {
		it["policy_audit"] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if len(r.Degraded) > 0 {
		it["degraded"] = &types.AttributeValueMemberSS{Value: r.Degraded}
	}
	if len(r.Findings) > 0 {
		l := make([]types.AttributeValue, len(r.Findings))
		for i, f := range r.Findings {
			l[i] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"at": S(f.At), "kind": S(f.Kind), "rule": S(f.Rule), "action": S(f.Action),
			}}
		}
		it["findings"] = &types.AttributeValueMemberL{Value: l}
	}
	if r.FindingsCut > 0 {
		it["findings_cut"] = N(int64(r.FindingsCut))
	}
	str("writer", r.Writer)
	if r.Seq > 0 {
		it["seq"] = &types.AttributeValueMemberN{Value: strconv.FormatUint(r.Seq, 10)}
	}
	str("prev", r.Prev)
	str("hash", r.Hash)
	return it
}

// AuditShards is how many partitions hold one tenant's audit records. At
// DynamoDB's 1,000 write units a second per partition, 8 shards take 8,000
// records a second per tenant (records are under 1 KB); a page of a query
// reads all 8.
const AuditShards = 8

// auditPK is the partition key of a tenant's shard. Tenant names have no
// '#' (registry names), so no shard's key is another tenant's.
func auditPK(tenant string, shard int) string {
	if shard == 0 {
		return tenant
	}
	return tenant + "#" + strconv.Itoa(shard)
}

// AuditPKs lists the partition keys of tenant's audit records, shard 0
// (its checkpoints' too) first: for those who read the table themselves.
func AuditPKs(tenant string) []string {
	out := make([]string, AuditShards)
	for i := range out {
		out[i] = auditPK(tenant, i)
	}
	return out
}

// auditShard is the shard of a record with this random suffix: its first
// hex digit, modulo AuditShards.
func auditShard(suffix string) int {
	if suffix == "" {
		return 0
	}
	d, err := strconv.ParseUint(suffix[:1], 16, 8)
	if err != nil {
		return 0
	}
	return int(d) % AuditShards
}

// auditLists reads the record's degraded stages and findings.
func auditLists(it Item, r *audit.Record) {
	if ss, ok := it["degraded"].(*types.AttributeValueMemberSS); ok {
		r.Degraded = ss.Value
	}
	if l, ok := it["findings"].(*types.AttributeValueMemberL); ok {
		for _, v := range l.Value {
			if m, ok := v.(*types.AttributeValueMemberM); ok {
				f := Item(m.Value)
				r.Findings = append(r.Findings, audit.Finding{At: GetS(f, "at"), Kind: GetS(f, "kind"), Rule: GetS(f, "rule"), Action: GetS(f, "action")})
			}
		}
	}
	r.FindingsCut = int(GetN(it, "findings_cut"))
}

func auditFromItem(it Item) audit.Record {
	t, _ := time.Parse(time.RFC3339Nano, GetS(it, "time"))
	var lat float64
	if v, ok := it["latency_ms"].(*types.AttributeValueMemberN); ok {
		lat, _ = strconv.ParseFloat(v.Value, 64)
	}
	r := audit.Record{
		Time: t, Tenant: GetS(it, "tenant"), Caller: GetS(it, "caller"), Session: GetS(it, "session"),
		CorrelationID: GetS(it, "correlation_id"), Layer: GetS(it, "layer"), Method: GetS(it, "method"),
		Server: GetS(it, "server"), Tool: GetS(it, "tool"), ParamsHash: GetS(it, "params_hash"),
		Code: int(GetN(it, "code")), Word: GetS(it, "word"), Slot: GetS(it, "slot"), Outcome: audit.Outcome(GetS(it, "outcome")),
		LatencyMs: lat, PolicyHash: GetS(it, "policy_hash"), Detail: GetS(it, "detail"),
		PolicyVerdict: GetS(it, "policy_verdict"), PolicyRule: GetS(it, "policy_rule"), PolicyAudit: policyAudit(it),
		Connection: GetS(it, "connection"),
	}
	auditLists(it, &r)
	r.Writer, r.Prev, r.Hash = GetS(it, "writer"), GetS(it, "prev"), GetS(it, "hash")
	if v, ok := it["seq"].(*types.AttributeValueMemberN); ok {
		r.Seq, _ = strconv.ParseUint(v.Value, 10, 64)
	}
	return r
}

// policyAudit reads the record's policy_audit flag.
func policyAudit(it Item) bool {
	b, ok := it["policy_audit"].(*types.AttributeValueMemberBOOL)
	return ok && b.Value
}

// Write implements audit.Writer.
func (s *Store) Write(ctx context.Context, r audit.Record) error {
	if r.Tenant == "" {
		return errors.New("dynamo: audit record without tenant")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(s.tables.Audit),
		Item:                AuditItem(r, s.opt.AuditRetention, hex.EncodeToString(b[:])),
		ConditionExpression: aws.String("attribute_not_exists(sk)"),
	})
	return mapErr("audit Write", err)
}

// Query implements audit.Reader. The cursor is the last returned sort key.
func (s *Store) Query(ctx context.Context, q audit.Query) ([]audit.Record, string, error) {
	return queryAudit(ctx, s, q, "", AuditShards, "audit Query", func(it Item) (audit.Record, time.Time) {
		r := auditFromItem(it)
		return r, r.Time
	})
}

// queryAudit reads one page of q from the audit table: the items of
// q.Tenant's first shards shards whose sort keys are prefix and a time in
// [q.From, q.To], each read by decode (the item and its time), oldest first
// (by sort key across shards), those past AUDIT_RETENTION_DAYS left out (the
// ttl filter has second precision, so each is aged exactly). The shards are
// read together, each up to a page; the cursor is, per shard, the last sort
// key returned from it (base64url of their JSON list).
func queryAudit[T any](ctx context.Context, s *Store, q audit.Query, prefix string, shards int, op string, decode func(Item) (T, time.Time)) ([]T, string, error) {
	limit := audit.PageSize(q.Limit)
	after := make([]string, shards) // per shard: the last sort key returned ("" = from the start)
	if q.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		if err != nil || json.Unmarshal(raw, &after) != nil || len(after) != shards {
			return nil, "", audit.ErrBadCursor
		}
	}
	type shardPage struct {
		items []shardItem[T]
		more  bool // the shard may hold more past its last item
		err   error
	}
	pages := make([]shardPage, shards)
	var wg sync.WaitGroup
	for i := range shards {
		wg.Go(func() {
			pages[i].items, pages[i].more, pages[i].err = queryShard(ctx, s, q, auditPK(q.Tenant, i), after[i], prefix, limit, decode)
		})
	}
	wg.Wait()
	var all []shardItem[T]
	more := false
	for i, p := range pages {
		if p.err != nil {
			return nil, "", mapErr(op, p.err)
		}
		for j := range p.items {
			p.items[j].shard = i
		}
		all = append(all, p.items...)
		more = more || p.more
	}
	slices.SortFunc(all, func(a, b shardItem[T]) int { return strings.Compare(a.sk, b.sk) })
	if len(all) > limit {
		all, more = all[:limit], true
	}
	out := make([]T, len(all))
	for i, it := range all {
		out[i] = it.v
		after[it.shard] = it.sk
	}
	if !more {
		return out, "", nil
	}
	raw, _ := json.Marshal(after) // strings only: cannot fail
	return out, base64.RawURLEncoding.EncodeToString(raw), nil
}

// shardItem is one item read from a shard: its value and sort key.
type shardItem[T any] struct {
	v     T
	sk    string
	shard int
}

// queryShard reads up to limit items of one shard's partition pk after
// sort key after ("" = from q.From), as queryAudit describes. more is
// DynamoDB's word that the partition may hold more.
func queryShard[T any](ctx context.Context, s *Store, q audit.Query, pk, after, prefix string, limit int, decode func(Item) (T, time.Time)) ([]shardItem[T], bool, error) {
	var start Item
	if after != "" {
		start = Key(pk, after)
	}
	now := s.opt.Now()
	var out []shardItem[T]
	for {
		page, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                aws.String(s.tables.Audit),
			KeyConditionExpression:   aws.String("pk = :t AND sk BETWEEN :from AND :to"),
			FilterExpression:         aws.String("#ttl > :now"),
			ExpressionAttributeNames: map[string]string{"#ttl": AttrTTL},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":t":    S(pk),
				":from": S(prefix + q.From.UTC().Format(audit.SortTimeLayout)),
				":to":   S(prefix + q.To.UTC().Format(audit.SortTimeLayout)),
				":now":  N(now.Unix()),
			},
			ExclusiveStartKey: start,
			Limit:             aws.Int32(int32(limit - len(out))),
		})
		if err != nil {
			return nil, false, err
		}
		for _, it := range page.Items {
			if v, t := decode(it); t.Add(s.opt.AuditRetention).After(now) {
				out = append(out, shardItem[T]{v: v, sk: GetS(it, AttrSK)})
			}
		}
		if page.LastEvaluatedKey == nil {
			return out, false, nil
		}
		if len(out) >= limit {
			return out, true, nil
		}
		start = page.LastEvaluatedKey
	}
}

var (
	_ audit.Writer = (*Store)(nil)
	_ audit.Reader = (*Store)(nil)
)
