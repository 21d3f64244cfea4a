package approval_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/aegis-gw/aegis/shared/approval"
)

func TestMask(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"to":"acct-1","amount":5}`, `{"to":"acct-1","amount":5}`},
		{`{"password":"hunter2","api_key":"x","nested":{"Authorization":"y"}}`, `{"password":"[masked]","api_key":"[masked]","nested":{"Authorization":"[masked]"}}`},
		{`{"note":"card 4111 1111 1111 1111"}`, `{"note":"card [masked:card]"}`},
		{`{"note":"ssn 123-45-6789"}`, `{"note":"ssn [masked:ssn]"}`},
		{`{"k":["ghp_abcdefghijklmnopqrstuvwxyz0123456789","plain"]}`, `{"k":["[masked:token]","plain"]}`},
		{`{"order":"1234 5678 9012 3456"}`, `{"order":"1234 5678 9012 3456"}`}, // not Luhn-valid
		{`{"big":12345678901234567890}`, `{"big":12345678901234567890}`},
		{`not json`, `"[unreadable]"`},
	} {
		if got := string(approval.Mask(json.RawMessage(c.in))); got != c.want {
			t.Errorf("Mask(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	if approval.Mask(nil) != nil {
		t.Error("Mask(nil) != nil")
	}
}

func TestSignVerify(t *testing.T) {
	secret, body := []byte("s3cret"), []byte(`{"type":"approval.held"}`)
	at := time.Unix(1764500000, 0)
	h := approval.Sign(secret, at, body)
	if !strings.HasPrefix(h, "t=1764500000,v1=") || len(h) != len("t=1764500000,v1=")+64 {
		t.Fatalf("header = %q", h)
	}
	if err := approval.Verify(secret, h, body, at.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		secret, body []byte
		now          time.Time
	}{
		"other secret": {[]byte("other"), body, at},
		"other body":   {secret, []byte(`{}`), at},
		"replayed":     {secret, body, at.Add(time.Hour)},
	} {
		if approval.Verify(c.secret, h, c.body, c.now, 5*time.Minute) == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestSlotDigest(t *testing.T) {
	a := approval.Slot{Tenant: "t", Caller: "a", Server: "bc", Tool: "x", ParamsHash: "h"}
	b := approval.Slot{Tenant: "t", Caller: "ab", Server: "c", Tool: "x", ParamsHash: "h"}
	if a.Digest() == b.Digest() {
		t.Fatal("slots that differ only in field boundaries share a digest")
	}
}

type fakeSNS struct {
	mu  sync.Mutex
	got []*sns.PublishInput
}

func (f *fakeSNS) Publish(_ context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, in)
	return &sns.PublishOutput{}, nil
}

func TestFromEnvPublishesToSNS(t *testing.T) {
	f := &fakeSNS{}
	env := map[string]string{approval.EnvTopicARN: "arn:aws:sns:us-east-1:123456789012:approvals"}
	n := approval.FromEnv(func(k string) string { return env[k] }, nil, func() approval.Publisher { return f }, nil)
	a := approval.Approval{ID: "id-1", Tenant: "acme", Server: "payments", Tool: "transfer", Status: approval.Pending}
	n.Notify(context.Background(), approval.Event{Type: approval.EventHeld, Approval: a})
	n.Wait()
	if len(f.got) != 1 || aws.ToString(f.got[0].TopicArn) != env[approval.EnvTopicARN] ||
		!strings.Contains(aws.ToString(f.got[0].Message), `"id":"id-1"`) ||
		aws.ToString(f.got[0].MessageAttributes["tenant"].StringValue) != "acme" {
		t.Fatalf("published %+v", f.got)
	}
	// Without the topic, nothing is published.
	f.got = nil
	n = approval.FromEnv(func(string) string { return "" }, nil, func() approval.Publisher { return f }, nil)
	n.Notify(context.Background(), approval.Event{Type: approval.EventHeld, Approval: a})
	n.Wait()
	if len(f.got) != 0 {
		t.Fatal("published without a topic")
	}
}
