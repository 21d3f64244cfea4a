package dynamo

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

// Session item (state table), one per tenant and session id:
//
//	pk S#<tenant>#<id>  sk SESSION
//	caller, protocol, caps, manifest S; created, last_seen N (Unix nanoseconds);
//	up M (server name → upstream Mcp-Session-Id); ask M (asked.go); ttl N;
//	wm, ws N and wt M: its own rate windows (sessionwindow.go)
//
// Session is one consistent GetItem, the clocks checked in Go. Touch is
// one UpdateItem whose condition holds both session clocks and which
// returns the whole record (ReturnValues ALL_NEW).
const skSession = "SESSION"

func sessionKey(tenant, id string) Item { return Key(JoinKey("S", tenant, id), skSession) }

// Create implements session.Store (condition: attribute_not_exists(pk)).
func (s *Store) Create(ctx context.Context, r session.Record) error {
	up := make(map[string]types.AttributeValue, len(r.Upstream))
	for k, v := range r.Upstream {
		up[k] = S(v)
	}
	it := sessionKey(r.Tenant, r.ID)
	it["id"], it["tenant"], it["caller"] = S(r.ID), S(r.Tenant), S(r.Caller)
	if r.Protocol != "" {
		it["protocol"] = S(r.Protocol)
	}
	if r.Capabilities != "" {
		it["caps"] = S(r.Capabilities)
	}
	if r.Manifest != "" {
		it["manifest"] = S(r.Manifest)
	}
	it["created"], it["last_seen"] = N(r.Created.UnixNano()), N(r.LastSeen.UnixNano())
	it["up"] = &types.AttributeValueMemberM{Value: up}
	it[attrAsked] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}} // asked.go
	// Its own rate windows (sessionwindow.go): those it is created with,
	// else its creation minute's, empty, so that the first Admit of that
	// minute finds the shape it guesses.
	w := r.Windows
	if w.Start.IsZero() {
		w.Start = r.Created.UTC().Truncate(time.Minute)
	}
	tools := make(map[string]types.AttributeValue, len(w.Tools))
	for k, v := range w.Tools {
		tools[k] = N(v)
	}
	it[attrWindowMinute], it[attrWindowCalls] = N(w.Start.Unix()), N(w.Calls)
	it[attrWindowTools] = &types.AttributeValueMemberM{Value: tools}
	it[AttrTTL] = TTL(r.Created.Add(s.opt.SessionTTL))
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.tables.State), Item: it,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	return mapErr("session Create", err)
}

// Session implements session.Store: one consistent GetItem (a session
// another instance has just opened is seen), expiry decided by
// session.Limits.Expired.
func (s *Store) Session(ctx context.Context, tenant, id string, now time.Time, l session.Limits) (session.Record, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.tables.State), Key: sessionKey(tenant, id), ConsistentRead: aws.Bool(true),
	})
	if err = mapErr("session read", err); err != nil {
		return session.Record{}, err
	}
	if len(out.Item) == 0 {
		return session.Record{}, store.ErrNotFound
	}
	r := sessionFromItem(out.Item)
	if l.Expired(r, now) {
		return session.Record{}, store.ErrNotFound
	}
	return r, nil
}

// Touch implements session.Store. Condition: the item exists, and
// created > now-Lifetime and last_seen > now-Idle (each when set); a lost
// condition is store.ErrNotFound.
func (s *Store) Touch(ctx context.Context, tenant, id string, now time.Time, l session.Limits) (session.Record, error) {
	cond, vals := s.sessionClocks(now, l)
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.tables.State),
		Key:                       sessionKey(tenant, id),
		UpdateExpression:          aws.String("SET last_seen = :now, #ttl = :ttl"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#ttl": AttrTTL},
		ExpressionAttributeValues: vals,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err = mapErr("session Touch", err); err != nil {
		if isConflict(err) {
			return session.Record{}, store.ErrNotFound
		}
		return session.Record{}, err
	}
	return sessionFromItem(out.Attributes), nil
}

func sessionFromItem(it Item) session.Record {
	r := session.Record{
		ID: GetS(it, "id"), Tenant: GetS(it, "tenant"), Caller: GetS(it, "caller"), Protocol: GetS(it, "protocol"), Capabilities: GetS(it, "caps"),
		Manifest: GetS(it, "manifest"),
		Created:  time.Unix(0, GetN(it, "created")).UTC(), LastSeen: time.Unix(0, GetN(it, "last_seen")).UTC(),
	}
	sessionCounters(it, &r) // sessioncount.go
	sessionWindows(it, &r)  // sessionwindow.go
	if m, ok := it["up"].(*types.AttributeValueMemberM); ok && len(m.Value) > 0 {
		r.Upstream = make(map[string]string, len(m.Value))
		for k := range m.Value {
			r.Upstream[k] = GetS(m.Value, k)
		}
	}
	return r
}

// SetUpstream implements session.Store (condition: the session exists).
func (s *Store) SetUpstream(ctx context.Context, tenant, id, server, upstreamID string) error {
	in := &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.tables.State),
		Key:                      sessionKey(tenant, id),
		ConditionExpression:      aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames: map[string]string{"#s": server},
	}
	if upstreamID == "" {
		in.UpdateExpression = aws.String("REMOVE up.#s")
	} else {
		in.UpdateExpression = aws.String("SET up.#s = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": S(upstreamID)}
	}
	_, err := s.db.UpdateItem(ctx, in)
	if err = mapErr("session SetUpstream", err); isConflict(err) {
		return store.ErrNotFound
	}
	return err
}

// Delete implements session.Store.
func (s *Store) Delete(ctx context.Context, tenant, id string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.tables.State), Key: sessionKey(tenant, id),
	})
	return mapErr("session Delete", err)
}

var _ session.Store = (*Store)(nil)
