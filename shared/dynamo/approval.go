package dynamo

import (
	"context"
	"encoding/json"
	"errors"
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
// Every change is conditional on the slot item: a new approval replaces the
// slot's current one only if that is still the one read (aid = :old, or no
// item); Decide and Consume change it only while aid, st and exp still say
// it is the right approval in the right state, so of two racing Consumes
// exactly one wins. The ttl (exp + ApprovalRetention) only collects garbage.
const (
	prefixApproval  = "APPROVAL"
	skApprovalIndex = "APPROVAL"

	attrAID = "aid"
	attrSt  = "st"
	attrExp = "exp"

	// ApprovalRetention is how long an approval's items outlive its expiry
	// before DynamoDB's TTL may collect them (listing shows it as expired).
	ApprovalRetention = 7 * 24 * time.Hour

	holdRounds = 4
)

func approvalSlotSK(sl approval.Slot) string { return JoinKey(prefixApproval, sl.Digest()) }
func approvalIndexPK(id string) string       { return JoinKey("A", id) }

func approvalNames() map[string]string {
	return map[string]string{"#aid": attrAID, "#st": attrSt, "#exp": attrExp, "#doc": AttrDoc}
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
			put.ConditionExpression = aws.String("#aid = :old")
			put.ExpressionAttributeNames = map[string]string{"#aid": attrAID}
			put.ExpressionAttributeValues = map[string]types.AttributeValue{":old": S(cur.ID)}
		} else {
			put.ConditionExpression = aws.String("attribute_not_exists(pk)")
		}
		idx := Key(approvalIndexPK(cand.ID), skApprovalIndex)
		idx["tenant"], idx["slot"], idx[AttrTTL] = S(cand.Tenant), S(sk), TTL(cand.Expires.Add(ApprovalRetention))
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: put},
			{Put: &types.Put{TableName: aws.String(s.tables.State), Item: idx, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		}})
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

func (s *Store) readSlot(ctx context.Context, op, pk, sk string) (approval.Approval, bool, error) {
	var a approval.Approval
	err := s.getDoc(ctx, op, pk, sk, &a)
	if errors.Is(err, store.ErrNotFound) {
		return a, false, nil
	}
	return a, err == nil, err
}

// update rewrites the slot item of a (whose new state is next) iff the item
// still holds a with status from and is not expired at now.
func (s *Store) updateSlot(ctx context.Context, op string, a, next approval.Approval, from approval.Status, now time.Time) error {
	doc, err := json.Marshal(next)
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.tables.State),
		Key:                      Key(tenantPK(a.Tenant), approvalSlotSK(a.Slot())),
		UpdateExpression:         aws.String("SET #st = :to, #doc = :doc"),
		ConditionExpression:      aws.String("#aid = :id AND #st = :from AND #exp > :now"),
		ExpressionAttributeNames: approvalNames(),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":to": S(string(next.Status)), ":doc": S(string(doc)), ":id": S(a.ID),
			":from": S(string(from)), ":now": N(now.UnixNano()),
		},
	})
	return mapErr(op, err)
}

// ConsumeApproval implements approval.Store: one conditional UpdateItem.
func (s *Store) ConsumeApproval(ctx context.Context, a approval.Approval, now time.Time) (approval.Approval, error) {
	next := a
	next.Status, next.ConsumedAt = approval.Consumed, now.UTC()
	if err := s.updateSlot(ctx, "ConsumeApproval", a, next, approval.Approved, now); err != nil {
		return approval.Approval{}, err
	}
	return next, nil
}

// ReleaseApproval implements approval.Store: one conditional UpdateItem,
// consumed back to approved.
func (s *Store) ReleaseApproval(ctx context.Context, a approval.Approval, now time.Time) (approval.Approval, error) {
	next := a
	next.Status, next.ConsumedAt = approval.Approved, time.Time{}
	if err := s.updateSlot(ctx, "ReleaseApproval", a, next, approval.Consumed, now); err != nil {
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
	cur, found, err := s.readSlot(ctx, op, tenantPK(GetS(out.Item, "tenant")), GetS(out.Item, "slot"))
	if err != nil {
		return approval.Approval{}, err
	}
	if !found || cur.ID != id {
		return approval.Approval{}, store.ErrConflict // superseded
	}
	return cur, nil
}

// DecideApproval implements approval.Store.
func (s *Store) DecideApproval(ctx context.Context, id string, d approval.Decision, now time.Time) (approval.Approval, error) {
	cur, err := s.locate(ctx, "DecideApproval", id)
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
	if isConflict(err) {
		return approval.Approval{}, store.ErrNotFound
	}
	return a, err
}

// ListApprovals implements approval.Store: a Query of the tenant's
// partition, or (every tenant, admin only) a Scan of slot items.
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
		if err := s.queryDocs(ctx, "ListApprovals", tenantPK(f.Tenant), prefixApproval+"#", decode); err != nil {
			return nil, err
		}
	} else {
		p := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{
			TableName:                 aws.String(s.tables.State),
			FilterExpression:          aws.String("begins_with(pk, :t) AND begins_with(sk, :p)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": S("T#"), ":p": S(prefixApproval + "#")},
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
