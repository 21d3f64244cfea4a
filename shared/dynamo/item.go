package dynamo

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Item is a DynamoDB item. Helpers here build and read the attributes every
// concern shares: the key (pk, sk), the ttl, and a JSON document attribute.
type Item = map[string]types.AttributeValue

// Attribute names shared by every item of both tables.
const (
	AttrPK  = "pk"
	AttrSK  = "sk"
	AttrTTL = "ttl" // epoch seconds; DynamoDB's TTL attribute, garbage collection only
	AttrDoc = "doc" // JSON document of the item's record, where a concern uses one
)

// KeyPart escapes one component of a key so that components joined with '#'
// never collide: '%' and '#' are percent-encoded.
func KeyPart(s string) string {
	if !strings.ContainsAny(s, "%#") {
		return s
	}
	return strings.NewReplacer("%", "%25", "#", "%23").Replace(s)
}

// JoinKey joins a fixed prefix and escaped components with '#':
// JoinKey("S", tenant, id) = "S#<tenant>#<id>".
func JoinKey(prefix string, parts ...string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, p := range parts {
		b.WriteByte('#')
		b.WriteString(KeyPart(p))
	}
	return b.String()
}

// Key is the primary key {pk, sk}.
func Key(pk, sk string) Item {
	return Item{AttrPK: S(pk), AttrSK: S(sk)}
}

// S is a string attribute.
func S(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// N is a number attribute.
func N(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// TTL is the ttl attribute value for t (epoch seconds, rounded up so an item
// is never collected before t).
func TTL(t time.Time) types.AttributeValue {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return N(s)
}

// GetS reads a string attribute ("" when absent or not a string).
func GetS(it Item, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// GetN reads an integer number attribute (0 when absent or not a number).
func GetN(it Item, name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

// Doc is the doc attribute holding v as JSON.
func Doc(v any) (types.AttributeValue, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return S(string(b)), nil
}

// GetDoc decodes the doc attribute of it into v.
func GetDoc(it Item, v any) error {
	return json.Unmarshal([]byte(GetS(it, AttrDoc)), v)
}
