package approval

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/aegis-gw/aegis/shared/netguard"
	"github.com/aegis-gw/aegis/shared/registry"
)

// Event is what an approver is told when a call is held.
type Event struct {
	Type     string          // EventHeld
	Approval Approval        // the new pending approval
	Tenant   registry.Tenant // its tenant (webhook URL and secret reference)
}

// Notifier tells approvers about events. Notify must not block the call for
// long and never fails it: a notifier logs its own failures.
type Notifier interface {
	Notify(ctx context.Context, e Event)
}

// Payload is the JSON body of a notification (webhook body, SNS message).
type Payload struct {
	Type     string        `json:"type"`
	Time     time.Time     `json:"time"`
	Approval PayloadDetail `json:"approval"`
}

// PayloadDetail is the approval as a notification shows it.
type PayloadDetail struct {
	ID      string          `json:"id"`
	Tenant  string          `json:"tenant"`
	Caller  string          `json:"caller"`
	Server  string          `json:"server"`
	Tool    string          `json:"tool"`
	Params  json.RawMessage `json:"params,omitempty"` // masked
	Status  Status          `json:"status"`
	Created time.Time       `json:"created"`
	Expires time.Time       `json:"expires"`
}

// Body encodes e as its notification payload.
func Body(e Event, now time.Time) []byte {
	a := e.Approval
	b, _ := json.Marshal(Payload{Type: e.Type, Time: now.UTC(), Approval: PayloadDetail{
		ID: a.ID, Tenant: a.Tenant, Caller: a.Caller, Server: a.Server, Tool: a.Tool,
		Params: a.Params, Status: a.Status, Created: a.Created, Expires: a.Expires,
	}})
	return b
}

// SignatureHeader carries a webhook's HMAC-SHA256 signature:
//
//	X-Aegis-Signature: t=UNIX_SECONDS,v1=HEX
//
// where HEX is the lower-case hex HMAC-SHA256, keyed with the tenant's
// webhook secret, of the string UNIX_SECONDS + "." + BODY.
const SignatureHeader = "X-Aegis-Signature"

// Sign returns the SignatureHeader value for body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a SignatureHeader value against body, refusing signatures
// older or newer than tolerance at now. Receivers in Go can use it as is.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range bytes.Split([]byte(header), []byte{','}) {
		k, v, _ := bytes.Cut(part, []byte{'='})
		switch string(k) {
		case "t":
			ts = string(v)
		case "v1":
			sig = string(v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return errors.New("malformed signature header")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("signature timestamp outside tolerance")
	}
	want := Sign(secret, time.Unix(sec, 0), body)
	if !hmac.Equal([]byte(want), []byte("t="+ts+",v1="+sig)) {
		return errors.New("signature mismatch")
	}
	return nil
}

// WebhookError is a tenant webhook that breaks ValidateWebhook's rule:
// Field is the setting at fault, as the config file and the admin API
// spell it ("webhook_url" or "webhook_secret_ref"), Reason the rule it
// breaks.
type WebhookError struct {
	Field  string
	Reason string
}

func (e *WebhookError) Error() string { return e.Field + ": " + e.Reason }

// ValidateWebhook is the one rule for a tenant's approval webhook, applied
// where a webhook is registered (shared/config for the config file,
// shared/admin for the admin API) and again by Webhook before every
// delivery: a webhook_url must pass netguard.ValidateURL (local is true
// only under aegis serve), and it needs a webhook_secret_ref, because
// every approval.held is signed (SignatureHeader) and a receiver cannot
// tell an unsigned one from a forgery. A secret reference without a URL is
// allowed: nothing is sent. The form of the reference is each front
// door's credential-reference check, and resolving it is the Resolver's.
// The error is a *WebhookError; its Reason may quote the URL, so a log
// must scrub it.
func ValidateWebhook(webhookURL, secretRef string, local bool) error {
	if webhookURL == "" {
		return nil
	}
	if err := netguard.ValidateURL(webhookURL, local); err != nil {
		return &WebhookError{Field: "webhook_url", Reason: err.Error()}
	}
	if secretRef == "" {
		return &WebhookError{Field: "webhook_secret_ref", Reason: "required with webhook_url (webhooks are signed)"}
	}
	return nil
}

// errNotSent marks a webhook Webhook refused to send: unsigned, or
// breaking ValidateWebhook. Notify logs it at ERROR: it is a registration
// to fix, not a receiver that failed.
var errNotSent = errors.New("webhook not sent")

// Resolver turns a credential reference (registry.Credential's Ref forms:
// env:NAME, file:/path, secretsmanager:..., ssm:...) into its value.
type Resolver interface {
	Resolve(ctx context.Context, ref string) (string, error)
}

// Webhook POSTs the payload to the tenant's WebhookURL, signed with the
// secret its WebhookSecretRef names. A tenant without a WebhookURL is
// skipped. A webhook is never sent unsigned: one that breaks
// ValidateWebhook (no WebhookSecretRef, say, in a store written before the
// rule), or whose secret cannot be resolved, is not sent, and Notify logs
// why at ERROR. Webhook itself is synchronous: wrap it in Async.
type Webhook struct {
	HTTP    *http.Client     // nil: a client with Timeout whose dialer applies netguard.Control
	Local   bool             // aegis serve: loopback webhook URLs allowed
	Secrets Resolver         // nil: no webhook is sent (none can be signed)
	Timeout time.Duration    // per delivery; 0 = 3 s
	Now     func() time.Time // nil = time.Now
	Logger  *slog.Logger     // nil = slog.Default()

	once   sync.Once
	client *http.Client
}

// webhookClient never follows redirects, uses no proxy (HTTP_PROXY and
// HTTPS_PROXY are ignored: through one, the dial check would see only the
// proxy's address) and checks every dialed address like an upstream's (no
// link-local or metadata addresses; loopback only in local mode), so a
// tenant's webhook URL cannot be pointed, through DNS or a proxy, at
// something inside the gateway's network.
func webhookClient(local bool) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = (&net.Dialer{Timeout: 3 * time.Second, Control: netguard.Control(local)}).DialContext
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// deliveryTimeout bounds one notification when its sender sets none.
const deliveryTimeout = 3 * time.Second

// delivery is one notification's deadline and timestamp: timeout (0 =
// deliveryTimeout) from now, and now by clock (nil = time.Now).
func delivery(ctx context.Context, clock func() time.Time, timeout time.Duration) (context.Context, context.CancelFunc, time.Time) {
	if clock == nil {
		clock = time.Now
	}
	if timeout <= 0 {
		timeout = deliveryTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, cancel, clock()
}

// Notify implements Notifier.
func (w *Webhook) Notify(ctx context.Context, e Event) {
	if e.Tenant.WebhookURL == "" {
		return
	}
	log := w.Logger
	if log == nil {
		log = slog.Default()
	}
	switch err := w.send(ctx, e); {
	case errors.Is(err, errNotSent):
		log.ErrorContext(ctx, "approval webhook refused: not sent; fix the tenant's webhook settings; the approval stays listed in GET /admin/v1/approvals",
			"tenant", e.Tenant.ID, "approval_id", e.Approval.ID, "webhook", webhookOrigin(e.Tenant.WebhookURL), "err", err)
	case err != nil:
		log.WarnContext(ctx, "approval webhook failed; the approval stays listed in GET /admin/v1/approvals",
			"tenant", e.Tenant.ID, "approval_id", e.Approval.ID, "webhook", webhookOrigin(e.Tenant.WebhookURL), "err", err)
	}
}

// send delivers e, signed; a webhook it cannot sign, or that breaks
// ValidateWebhook, is not sent (errNotSent). Its errors never carry the
// webhook URL (see scrub).
func (w *Webhook) send(ctx context.Context, e Event) error {
	if err := ValidateWebhook(e.Tenant.WebhookURL, e.Tenant.WebhookSecretRef, w.Local); err != nil {
		return fmt.Errorf("%w: %w", errNotSent, scrub(err, e.Tenant.WebhookURL))
	}
	if w.Secrets == nil {
		return fmt.Errorf("%w: no resolver for webhook_secret_ref is configured, so it cannot be signed", errNotSent)
	}
	ctx, cancel, t := delivery(ctx, w.Now, w.Timeout)
	defer cancel()
	body := Body(e, t)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Tenant.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return scrub(err, e.Tenant.WebhookURL)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "aegis-approvals/1")
	req.Header.Set("X-Aegis-Event", e.Type)
	req.Header.Set("X-Aegis-Delivery", e.Approval.ID)
	secret, err := w.Secrets.Resolve(ctx, e.Tenant.WebhookSecretRef)
	if err != nil {
		return fmt.Errorf("%w: resolving webhook_secret_ref: %w", errNotSent, err)
	}
	req.Header.Set(SignatureHeader, Sign([]byte(secret), t, body))
	client := w.HTTP
	if client == nil {
		w.once.Do(func() { w.client = webhookClient(w.Local) })
		client = w.client
	}
	resp, err := client.Do(req)
	if err != nil {
		return scrub(err, e.Tenant.WebhookURL)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered HTTP %d", resp.StatusCode)
	}
	return nil
}

// webhookOrigin is what logs may say of a webhook URL: its scheme and host.
// The rest can be a credential (Slack-style URLs carry their secret in the
// path; others in the query or the user info).
func webhookOrigin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "[unparsable URL]"
	}
	return u.Scheme + "://" + u.Host
}

// scrubbedError is an error whose text has had a webhook URL taken out. It
// unwraps to the cause, so errors.Is (context.DeadlineExceeded, ...) works.
type scrubbedError struct {
	text  string
	cause error
}

func (e *scrubbedError) Error() string { return e.text }
func (e *scrubbedError) Unwrap() error { return e.cause }

// scrub returns err without rawURL in it: a *url.Error (which quotes the
// whole URL) is replaced by its operation and cause, and any part of the
// URL that could be secret (the URL, its user info, path, query and
// fragment) still left in the text is replaced by "[redacted]".
func scrub(err error, rawURL string) error {
	cause, text := err, err.Error()
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		cause, text = ue.Err, ue.Op+": "+ue.Err.Error()
	}
	parts := []string{rawURL, strings.Trim(strconv.Quote(rawURL), `"`)}
	if u, perr := url.Parse(rawURL); perr == nil {
		if u.User != nil {
			parts = append(parts, u.User.String())
		}
		for _, p := range []string{u.EscapedPath(), u.Path, u.RawQuery, u.Fragment} {
			if len(strings.Trim(p, "/")) > 0 {
				parts = append(parts, p)
			}
		}
	}
	for _, p := range parts {
		if p != "" {
			text = strings.ReplaceAll(text, p, "[redacted]")
		}
	}
	return &scrubbedError{text: text, cause: cause}
}

// Publisher is the part of the SNS client SNS uses (*sns.Client has it).
type Publisher interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// SNS publishes the payload to one topic (AEGIS_APPROVAL_TOPIC_ARN), with
// message attributes event and tenant for subscription filters.
type SNS struct {
	Client   Publisher
	TopicARN string
	Timeout  time.Duration    // 0 = 3 s
	Now      func() time.Time // nil = time.Now
	Logger   *slog.Logger
}

// Notify implements Notifier.
func (s *SNS) Notify(ctx context.Context, e Event) {
	ctx, cancel, t := delivery(ctx, s.Now, s.Timeout)
	defer cancel()
	_, err := s.Client.Publish(ctx, &sns.PublishInput{
		TopicArn: aws.String(s.TopicARN),
		Subject:  aws.String(fmt.Sprintf("aegis: approval required for %s on %s", e.Approval.Tool, e.Approval.Server)),
		Message:  aws.String(string(Body(e, t))),
		MessageAttributes: map[string]snstypes.MessageAttributeValue{
			"event":  {DataType: aws.String("String"), StringValue: aws.String(e.Type)},
			"tenant": {DataType: aws.String("String"), StringValue: aws.String(e.Approval.Tenant)},
		},
	})
	if err != nil {
		log := s.Logger
		if log == nil {
			log = slog.Default()
		}
		log.WarnContext(ctx, "approval SNS publish failed; the approval stays listed in GET /admin/v1/approvals",
			"tenant", e.Approval.Tenant, "approval_id", e.Approval.ID, "err", err)
	}
}

// Multi tells every notifier, in order.
type Multi []Notifier

// Notify implements Notifier.
func (m Multi) Notify(ctx context.Context, e Event) {
	for _, n := range m {
		n.Notify(ctx, e)
	}
}

// Async sends notifications in the background so that a slow or failing
// receiver never delays or fails the held call. The call's cancellation does
// not reach the send (each notifier applies its own short timeout).
//
// On Lambda the execution environment may be frozen as soon as the response
// is returned, so a background send can be delayed until the next
// invocation thaws it, or lost if the environment is recycled. Pending
// approvals stay listed in GET /admin/v1/approvals, which is the record of
// truth; see docs/approvals.md.
type Async struct {
	N  Notifier
	wg sync.WaitGroup
}

// Notify implements Notifier.
func (a *Async) Notify(ctx context.Context, e Event) {
	ctx = context.WithoutCancel(ctx)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.N.Notify(ctx, e)
	}()
}

// Wait blocks until every notification started so far has been sent or
// given up (tests, and graceful shutdown).
func (a *Async) Wait() { a.wg.Wait() }

var (
	_ Notifier = (*Webhook)(nil)
	_ Notifier = (*SNS)(nil)
	_ Notifier = Multi(nil)
	_ Notifier = (*Async)(nil)
)

// EnvTopicARN names the SNS topic approvals are published to on AWS.
const EnvTopicARN = "AEGIS_APPROVAL_TOPIC_ARN"

// FromEnv is the notifier a gateway function builds at start: tenant
// webhooks always, plus SNS when AEGIS_APPROVAL_TOPIC_ARN is set (newSNS
// builds the client, e.g. sns.NewFromConfig over the function's AWS config;
// it is called only then). Everything is sent asynchronously.
func FromEnv(getenv func(string) string, secrets Resolver, newSNS func() Publisher, log *slog.Logger) *Async {
	n := Multi{&Webhook{Secrets: secrets, Logger: log}}
	if arn := getenv(EnvTopicARN); arn != "" && newSNS != nil {
		n = append(n, &SNS{Client: newSNS(), TopicARN: arn, Logger: log})
	}
	return &Async{N: n}
}
