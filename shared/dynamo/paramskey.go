package dynamo

import (
	"context"
	"encoding/hex"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/store"
)

// Params-key items (state table), one partition for the deployment:
//
//	pk PARAMSKEY  sk CURRENT       cur = the current key's id
//	pk PARAMSKEY  sk KEY#<id>      doc {id, secret (hex), created, retired}
//
// The CURRENT item is what every write is conditional on: the first key is
// stored only where there is no CURRENT (one of several starting
// instances wins), and a rotation only while CURRENT still names the key
// being retired. The secret is at rest in the state table like the rest
// of the deployment's state (encrypted at rest by DynamoDB; read only by
// the functions' roles); it is never logged (audit.ParamsKey).
const (
	pkParamsKey     = "PARAMSKEY"
	skCurrentKey    = "CURRENT"
	prefixParamsKey = "KEY"
)

type paramsKeyDoc struct {
	ID      string    `json:"id"`
	Secret  string    `json:"secret"`
	Created time.Time `json:"created"`
	Retired time.Time `json:"retired,omitzero"`
}

func (s *Store) paramsKeyItem(k audit.StoredKey) (Item, error) {
	return s.docItem(pkParamsKey, JoinKey(prefixParamsKey, k.Key.ID()),
		paramsKeyDoc{ID: k.Key.ID(), Secret: k.Key.FormatSecret(), Created: k.Created.UTC(), Retired: k.Retired.UTC()})
}

// ParamsKeys implements audit.KeyStore: one strongly consistent Query.
func (s *Store) ParamsKeys(ctx context.Context) ([]audit.StoredKey, error) {
	var out []audit.StoredKey
	err := s.queryDocs(ctx, "ParamsKeys", pkParamsKey, prefixParamsKey+"#", func(it Item) error {
		var d paramsKeyDoc
		if err := GetDoc(it, &d); err != nil {
			return err
		}
		b, err := hex.DecodeString(d.Secret)
		if err != nil {
			return store.ErrUnavailable // a damaged item; the secret is not quoted
		}
		k, err := audit.NewParamsKey(b)
		if err != nil {
			return err
		}
		out = append(out, audit.StoredKey{Key: k, Created: d.Created, Retired: d.Retired})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortKeys(out)
	return out, nil
}

// sortKeys puts the current key first, then the retired ones, newest first.
func sortKeys(ks []audit.StoredKey) {
	sort.SliceStable(ks, func(i, j int) bool {
		if ci, cj := ks[i].Retired.IsZero(), ks[j].Retired.IsZero(); ci != cj {
			return ci
		}
		return ks[i].Created.After(ks[j].Created)
	})
}

// InitParamsKey implements audit.KeyStore: CURRENT and the key in one
// transaction, conditional on there being no CURRENT.
func (s *Store) InitParamsKey(ctx context.Context, k audit.StoredKey) (audit.StoredKey, error) {
	it, err := s.paramsKeyItem(k)
	if err != nil {
		return audit.StoredKey{}, err
	}
	cur := Key(pkParamsKey, skCurrentKey)
	cur["cur"] = S(k.Key.ID())
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(s.tables.State), Item: cur, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		s.put(it),
	}})
	if err = mapErr("InitParamsKey", err); err != nil && !isConflict(err) {
		return audit.StoredKey{}, err
	}
	ks, err := s.ParamsKeys(ctx)
	if err != nil {
		return audit.StoredKey{}, err
	}
	if len(ks) == 0 || !ks[0].Retired.IsZero() {
		return audit.StoredKey{}, store.ErrUnavailable
	}
	return ks[0], nil
}

// RotateParamsKey implements audit.KeyStore: CURRENT moved (conditional on
// naming prev), the new key put, the old one marked retired, in one
// transaction.
func (s *Store) RotateParamsKey(ctx context.Context, prev string, next audit.StoredKey, now time.Time) error {
	ks, err := s.ParamsKeys(ctx)
	if err != nil {
		return err
	}
	if len(ks) == 0 || !ks[0].Retired.IsZero() {
		return store.ErrNotFound
	}
	if ks[0].Key.ID() != prev {
		return store.ErrConflict
	}
	old := ks[0]
	old.Retired = now.UTC()
	oldIt, err := s.paramsKeyItem(old)
	if err != nil {
		return err
	}
	nextIt, err := s.paramsKeyItem(next)
	if err != nil {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: aws.String(s.tables.State), Key: Key(pkParamsKey, skCurrentKey),
			UpdateExpression:          aws.String("SET cur = :next"),
			ConditionExpression:       aws.String("cur = :prev"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":next": S(next.Key.ID()), ":prev": S(prev)},
		}},
		{Put: &types.Put{TableName: aws.String(s.tables.State), Item: nextIt, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		s.put(oldIt),
	}})
	return mapErr("RotateParamsKey", err)
}

var _ audit.KeyStore = (*Store)(nil)
