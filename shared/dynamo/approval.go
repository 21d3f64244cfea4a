package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/store"
)

// Approval items (state table); docs/design/approvals.md explains them.
//
// The slot item holds a slot's current approval, in the tenant's partition
// so that one Query lists a tenant's approvals:
//
//	pk T#<tenant>  sk APPROVAL#<slot digest>  aid  st  exp (unix ns)  doc  ttl
//
// The index item finds a slot from an approval id (the admin API's id):
//
//	pk A#<id>  sk APPROVAL  tenant  slot (the slot item's sk)  ttl
//
// A running approval (taken by a call, not yet settled) carries its use id
// in the slot item (use). When a new hold supersedes it, the same
// transaction moves it to a moved item of its own, kept until it is
// settled:
//
//	pk T#<tenant>  sk APPROVALUSE#<id>  aid  st (running)  use  exp  doc  ttl
//
// Every change is conditional: a new approval replaces the slot's current
// one only if that is still the one read (aid, st and use = :old..., or no
// item); Decide and Consume change it only while aid, st and exp still say
// it is the right approval in the right state, so of two racing Consumes
// exactly one wins; Settle and Release only while aid, st = running and use
// still name the use the caller holds. The ttl (exp + ApprovalRetention)
// only collects garbage.
const (
	prefixApproval  = "APPROVAL"
	prefixMovedUse  = "APPROVALUSE" // shares the prefix "APPROVAL": one Query lists both
	skApprovalIndex = "APPROVAL"

	attrAID = "aid"
	attrSt  = "st"
	attrExp = "exp"
	attrUse = "use"

	// ApprovalRetention is how long an approval's items outlive its expiry
	// before DynamoDB's TTL may collect them (listing shows it as expired).
	ApprovalRetention = 7 * 24 * time.Hour

	holdRounds = 4
)

func approvalSlotSK(sl approval.Slot) string { return JoinKey(prefixApproval, sl.Digest()) }
func approvalIndexPK(id string) string       { return JoinKey("A", id) }
func movedUseSK(id string) string            { return JoinKey(prefixMovedUse, id) }

func approvalNames() map[string]string {
	return map[string]string{"#aid": attrAID, "#st": attrSt, "#exp": attrExp, "#doc": AttrDoc, "#use": attrUse}
}

// useID is the use id a running approval's items carry in use ("" when
// it is not running: a settled approval keeps its Use in doc only).
func useID(a approval.Approval) string {
	if a.Status != approval.Running || a.Use == nil {
		return ""
	}
	return a.Use.ID
}

// HoldApproval implements approval.Store: GetItem of the slot, and only when
// a new approval is needed, one TransactWriteItems (slot + index).
func (s *Store) HoldApproval(ctx context.Context, cand approval.Approval, now time.Time) (approval.Approval, bool, error) {
	pk, sk := tenantPK(cand.Tenant), approvalSlotSK(cand.Slot())
	for range holdRounds {
		cur, found, err := s.readSlot(ctx, "HoldApproval", pk, sk)
		if err != nil {
			return approval.Approval{}, false, err
		}
		if found && cur.Live(now) {
			return cur, false, nil
		}
		slot, err := s.docItem(pk, sk, cand)
		if err != nil {
			return approval.Approval{}, false, err
		}
		slot[attrAID], slot[attrSt], slot[attrExp] = S(cand.ID), S(string(cand.Status)), N(cand.Expires.UnixNano())
		slot[AttrTTL] = TTL(cand.Expires.Add(ApprovalRetention))
		put := &types.Put{TableName: aws.String(s.tables.State), Item: slot}
		if found {
			// Replace exactly what was read: the same approval in the same
			// state (a running one under the same use), or lose and re-read.
			put.ConditionExpression = aws.String("#aid = :old AND #st = :oldst AND attribute_not_exists(#use)")
			put.ExpressionAttributeNames = map[string]string{"#aid": attrAID, "#st": attrSt, "#use": attrUse}
			put.ExpressionAttributeValues = map[string]types.AttributeValue{":old": S(cur.ID), ":oldst": S(string(cur.Status))}
			if u := useID(cur); u != "" {
				put.ConditionExpression = aws.String("#aid = :old AND #st = :oldst AND #use = :olduse")
				put.ExpressionAttributeValues[":olduse"] = S(u)
			}
		} else {
			put.ConditionExpression = aws.String("attribute_not_exists(pk)")
		}
		idx := Key(approvalIndexPK(cand.ID), skApprovalIndex)
		idx["tenant"], idx["slot"], idx[AttrTTL] = S(cand.Tenant), S(sk), TTL(cand.Expires.Add(ApprovalRetention))
		items := []types.TransactWriteItem{
			{Put: put},
			{Put: &types.Put{TableName: aws.String(s.tables.State), Item: idx, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		}
		if found && cur.Status == approval.Running {
			// Its call may have been sent: keep it, visible, until settled.
			moved, err := s.docItem(pk, movedUseSK(cur.ID), cur)
			if err != nil {
				return approval.Approval{}, false, err
			}
			moved[attrAID], moved[attrSt], moved[attrExp] = S(cur.ID), S(string(cur.Status)), N(cur.Expires.UnixNano())
			moved[attrUse], moved[AttrTTL] = S(useID(cur)), TTL(cur.Expires.Add(ApprovalRetention))
			items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.tables.State), Item: moved,
				ConditionExpression: aws.String("attribute_not_exists(pk)")}})
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		switch err = mapErr("HoldApproval", err); {
		case err == nil:
			return cand, true, nil
		case isConflict(err):
			continue // another hold or decision moved the slot on: read it again
		default:
			return approval.Approval{}, false, err
		}
	}
	return approval.Approval{}, false, errors.New("dynamo HoldApproval: slot kept changing")
}

// SlotApproval implements approval.Store: one consistent GetItem of the
// slot item.
func (s *Store) SlotApproval(ctx context.Context, sl approval.Slot) (approval.Approval, bool, error) {
	return s.readSlot(ctx, "SlotApproval", tenantPK(sl.Tenant), approvalSlotSK(sl))
}

func (s *Store) readSlot(ctx context.Context, op, pk, sk string) (approval.Approval, bool, error) {
	var a approval.Approval
	err := s.getDoc(ctx, op, pk, sk, &a)
	if errors.Is(err, store.ErrNotFound) {
		return a, false, nil
	}
	return a, err == nil, err
}

// updateSlot rewrites the slot item of a (whose new state is next) iff the
// item still holds a with status from and is not expired at now: st and
// doc are set, and use is set to next's use id or removed. A running a
// must also still carry its use id.
func (s *Store) updateSlot(ctx context.Context, op string, a, next approval.Approval, from approval.Status, now time.Time) error {
	doc, err := json.Marshal(next)
	if err != nil {
		return err
	}
	vals := map[string]types.AttributeValue{
		":to": S(string(next.Status)), ":doc": S(string(doc)), ":id": S(a.ID),
		":from": S(string(from)), ":now": N(now.UnixNano()),
	}
	update := "SET #st = :to, #doc = :doc REMOVE #use"
	if u := useID(next); u != "" {
		update = "SET #st = :to, #doc = :doc, #use = :nextuse"
		vals[":nextuse"] = S(u)
	}
	cond := "#aid = :id AND #st = :from AND #exp > :now"
	if from == approval.Running {
		cond += " AND #use = :use"
		vals[":use"] = S(useID(a))
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.tables.State),
		Key:                       Key(tenantPK(a.Tenant), approvalSlotSK(a.Slot())),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  approvalNames(),
		ExpressionAttributeValues: vals,
	})
	return mapErr(op, err)
}

// ConsumeApproval implements approval.Store: one conditional UpdateItem,
// approved to running with the use.
func (s *Store) ConsumeApproval(ctx context.Context, a approval.Approval, u approval.Use, now time.Time) (approval.Approval, error) {
	if u.ID == "" {
		return approval.Approval{}, errors.New("dynamo ConsumeApproval: use without an id")
	}
	next := a
	next.Status, next.ConsumedAt, next.Use = approval.Running, now.UTC(), &u
	if err := s.updateSlot(ctx, "ConsumeApproval", a, next, approval.Approved, now); err != nil {
		return approval.Approval{}, err
	}
	return next, nil
}

// ReleaseApproval implements approval.Store: one conditional UpdateItem,
// running (under a's use) back to approved.
func (s *Store) ReleaseApproval(ctx context.Context, a approval.Approval, now time.Time) (approval.Approval, error) {
	if useID(a) == "" {
		return approval.Approval{}, store.ErrConflict
	}
	next := a
	next.Status, next.ConsumedAt, next.Use = approval.Approved, time.Time{}, nil
	if err := s.updateSlot(ctx, "ReleaseApproval", a, next, approval.Running, now); err != nil {
		return approval.Approval{}, err
	}
	return next, nil
}

// SettleApproval implements approval.Store: one conditional UpdateItem of
// the slot (running under a's use, whatever the time, to consumed); when
// that condition fails because a new hold superseded it, one conditional
// DeleteItem of its moved item. A hold moves it in one transaction, so it
// is always in exactly one of the two places until settled.
func (s *Store) SettleApproval(ctx context.Context, a approval.Approval, o approval.Outcome, now time.Time) (approval.Approval, error) {
	u := useID(a)
	if u == "" {
		return approval.Approval{}, store.ErrConflict
	}
	next := a.Settled(o, now)
	doc, err := json.Marshal(next)
	if err != nil {
		return approval.Approval{}, err
	}
	names := map[string]string{"#aid": attrAID, "#st": attrSt, "#use": attrUse, "#doc": AttrDoc}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.tables.State),
		Key:                      Key(tenantPK(a.Tenant), approvalSlotSK(a.Slot())),
		UpdateExpression:         aws.String("SET #st = :to, #doc = :doc REMOVE #use"),
		ConditionExpression:      aws.String("#aid = :id AND #st = :running AND #use = :use"),
		ExpressionAttributeNames: names,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":to": S(string(approval.Consumed)), ":doc": S(string(doc)), ":id": S(a.ID),
			":running": S(string(approval.Running)), ":use": S(u),
		},
	})
	if err = mapErr("SettleApproval", err); !isConflict(err) {
		if err != nil {
			return approval.Approval{}, err
		}
		return next, nil
	}
	delete(names, "#doc")
	_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.tables.State),
		Key:                      Key(tenantPK(a.Tenant), movedUseSK(a.ID)),
		ConditionExpression:      aws.String("#aid = :id AND #st = :running AND #use = :use"),
		ExpressionAttributeNames: names,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":id": S(a.ID), ":running": S(string(approval.Running)), ":use": S(u),
		},
	})
	if err = mapErr("SettleApproval", err); err != nil {
		return approval.Approval{}, err
	}
	return next, nil
}

// locate finds the slot item of id through its index item.
func (s *Store) locate(ctx context.Context, op, id string) (approval.Approval, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.tables.State), Key: Key(approvalIndexPK(id), skApprovalIndex), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return approval.Approval{}, mapErr(op, err)
	}
	if out.Item == nil {
		return approval.Approval{}, store.ErrNotFound
	}
	pk := tenantPK(GetS(out.Item, "tenant"))
	cur, found, err := s.readSlot(ctx, op, pk, GetS(out.Item, "slot"))
	if err != nil {
		return approval.Approval{}, err
	}
	if !found || cur.ID != id {
		// Superseded; a running one is kept in its moved item until settled.
		moved, found, err := s.readSlot(ctx, op, pk, movedUseSK(id))
		if err != nil {
			return approval.Approval{}, err
		}
		if found {
			return moved, errSuperseded
		}
		return approval.Approval{}, store.ErrConflict
	}
	return cur, nil
}

// errSuperseded is locate's answer for a superseded approval that is still
// running (it returns the approval with it).
var errSuperseded = fmt.Errorf("superseded while running: %w", store.ErrConflict)

// DecideApproval implements approval.Store.
func (s *Store) DecideApproval(ctx context.Context, id string, d approval.Decision, now time.Time) (approval.Approval, error) {
	cur, err := s.locate(ctx, "DecideApproval", id)
	if errors.Is(err, errSuperseded) {
		return cur, store.ErrConflict
	}
	if err != nil {
		return approval.Approval{}, err
	}
	if cur.Status != approval.Pending || !now.Before(cur.Expires) {
		return cur, store.ErrConflict
	}
	next := cur
	next.Status, next.DecidedBy, next.DecidedAt, next.Reason = d.Status, d.By, now.UTC(), d.Reason
	if err := s.updateSlot(ctx, "DecideApproval", cur, next, approval.Pending, now); err != nil {
		if isConflict(err) {
			if again, gerr := s.locate(ctx, "DecideApproval", id); gerr == nil {
				return again, store.ErrConflict
			}
		}
		return approval.Approval{}, err
	}
	return next, nil
}

// GetApproval implements approval.Store.
func (s *Store) GetApproval(ctx context.Context, id string) (approval.Approval, error) {
	a, err := s.locate(ctx, "GetApproval", id)
	switch {
	case errors.Is(err, errSuperseded):
		return a, nil
	case isConflict(err):
		return approval.Approval{}, store.ErrNotFound
	}
	return a, err
}

// ListApprovals implements approval.Store: a Query of the tenant's
// partition, or (every tenant, admin only) a Scan, of slot and moved
// items (their sort keys share the prefix "APPROVAL").
func (s *Store) ListApprovals(ctx context.Context, f approval.Filter) ([]approval.Approval, error) {
	var out []approval.Approval
	decode := func(it Item) error {
		var a approval.Approval
		if err := GetDoc(it, &a); err != nil {
			return err
		}
		out = append(out, a)
		return nil
	}
	if f.Tenant != "" {
		if err := s.queryDocs(ctx, "ListApprovals", tenantPK(f.Tenant), prefixApproval, decode); err != nil {
			return nil, err
		}
	} else {
		p := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{
			TableName:                 aws.String(s.tables.State),
			FilterExpression:          aws.String("begins_with(pk, :t) AND begins_with(sk, :p)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": S("T#"), ":p": S(prefixApproval)},
			ConsistentRead:            aws.Bool(true),
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, mapErr("ListApprovals", err)
			}
			for _, it := range page.Items {
				if err := decode(it); err != nil {
					return nil, err
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

var _ approval.Store = (*Store)(nil)
