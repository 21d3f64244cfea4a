// Package dynamo is aegis's state in DynamoDB: every concern's store
// interface (registry, sessions, counters, kill switches, audit) over two
// tables, one single-table "state" table and one "audit" table. Access
// patterns, keys, TTLs and every conditional write are in
// docs/design/dynamodb.md; each concern has its own file here, and new
// concerns reuse the key and item helpers of item.go.
//
// Expiry is always checked in a condition or a filter, never left to TTL
// deletion: the ttl attribute only lets DynamoDB collect garbage.
//
// Errors: a lost condition is store.ErrConflict (or ErrNotFound where the
// interface says so); anything else from DynamoDB (unreachable, throttled
// past the retry budget, deadline reached) wraps store.ErrUnavailable.
//
// Deadlines: every operation the store makes has one, Options.OpTimeout
// (2 s by default), the SDK's retries and their waits included, whatever
// the caller's context says; a context.WithoutCancel write (an audit
// record, a lease release) is bounded by it too. The client's dial, TLS
// and response-header timeouts are well below it (NewClient), so a silent
// endpoint costs one attempt's wait, not the operation. See
// docs/design/dynamodb.md, "Deadlines".
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// Environment variables naming the tables, and their defaults.
const (
	EnvStateTable     = "AEGIS_STATE_TABLE"
	EnvAuditTable     = "AEGIS_AUDIT_TABLE"
	DefaultStateTable = "aegis-state"
	DefaultAuditTable = "aegis-audit"
)

// Tables names the two tables.
type Tables struct {
	State string // single-table design: registry, sessions, counters, kill switches, ...
	Audit string // audit records
}

// TablesFromEnv reads AEGIS_STATE_TABLE and AEGIS_AUDIT_TABLE through getenv
// (os.Getenv), with the defaults.
func TablesFromEnv(getenv func(string) string) Tables {
	t := Tables{State: getenv(EnvStateTable), Audit: getenv(EnvAuditTable)}
	if t.State == "" {
		t.State = DefaultStateTable
	}
	if t.Audit == "" {
		t.Audit = DefaultAuditTable
	}
	return t
}

// Options configure a Store. The zero value is usable.
type Options struct {
	// AuditRetention is how long audit records stay readable (their ttl);
	// default 90 days (AUDIT_RETENTION_DAYS).
	AuditRetention time.Duration
	// SessionTTL bounds how long a created but never touched session item
	// is kept; expiry itself is decided by session.Limits in Touch's
	// condition. Default 48h; keep it above SESSION_IDLE_SECS.
	SessionTTL time.Duration
	// Now is the clock that ages audit records on read; default time.Now.
	Now func() time.Time
	// OpTimeout is the deadline of every DynamoDB operation the store
	// makes, from its first attempt to its last answer, the SDK's retries
	// and backoff waits included. It applies whatever the caller's context
	// says (the earlier deadline wins), so writes made on a
	// context.WithoutCancel context are bounded as well. Default
	// DefaultOpTimeout; keep it above ResponseHeaderTimeout and above the
	// retryer's waits, (MaxAttempts-1) * MaxBackoff.
	OpTimeout time.Duration
	// PinBounds bound each tenant's pins; zero: registry.DefaultPinBounds.
	// Tests lower them.
	PinBounds registry.PinBounds
}

// DefaultOpTimeout is Options.OpTimeout's default: the budget of one
// DynamoDB operation. DynamoDB answers in milliseconds; 2 s leaves room
// for the retryer's four waits (1.6 s) after fast throttling answers, and
// for a second attempt after a silent first one (ResponseHeaderTimeout).
// A request makes at most a few such operations in sequence before its
// upstream call (docs/design/dynamodb.md, "Deadlines").
const DefaultOpTimeout = 2 * time.Second

// Store implements the state interfaces over DynamoDB. It is safe for
// concurrent use and holds no state of its own besides the client.
type Store struct {
	db     *dynamodb.Client
	tables Tables
	opt    Options
	guess  *windowGuess // sessionwindow.go
}

// New returns a store over client with the given tables. The store uses its
// own copy of client (same HTTP client and credentials) with the
// per-operation deadline (Options.OpTimeout) installed in front of every
// other middleware; Client returns that copy.
func New(client *dynamodb.Client, t Tables, o Options) *Store {
	if o.AuditRetention <= 0 {
		o.AuditRetention = 90 * 24 * time.Hour
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 48 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = DefaultOpTimeout
	}
	db := dynamodb.New(client.Options(), WithMiddleware(opDeadline(o.OpTimeout)))
	return &Store{db: db, tables: t, opt: o, guess: &windowGuess{}}
}

// Client returns the store's client, with its per-operation deadline
// (admin tools, tests).
func (s *Store) Client() *dynamodb.Client { return s.db }

// Tables returns the table names.
func (s *Store) Tables() Tables { return s.tables }

// Retry settings of the client: the SDK's standard retryer (exponential
// backoff with jitter, throttling errors such as
// ProvisionedThroughputExceededException included), with a short cap on
// each wait so that retries fit in an operation's deadline: the four waits
// of five attempts take at most 1.6 s, inside DefaultOpTimeout. The
// operation's deadline (Options.OpTimeout, or the caller's if earlier)
// bounds the whole operation, waits included.
const (
	MaxAttempts = 5
	MaxBackoff  = 400 * time.Millisecond
)

// Timeouts of one attempt, set on the client's HTTP transport by NewClient
// (the SDK's own defaults are a 30 s dial, a 10 s TLS handshake and no
// limit on the wait for an answer). Each is well below DefaultOpTimeout,
// so an endpoint that accepts and never answers, or a black-holed
// address, fails the attempt and leaves time for a retry on a fresh
// connection within the operation's budget.
const (
	DialTimeout           = 500 * time.Millisecond
	TLSHandshakeTimeout   = 500 * time.Millisecond
	ResponseHeaderTimeout = 1 * time.Second
)

// NewHTTPClient is the HTTP client NewClient gives the SDK: the SDK's
// buildable client with DialTimeout, TLSHandshakeTimeout and
// ResponseHeaderTimeout.
func NewHTTPClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = DialTimeout }).
		WithTransportOptions(func(tr *http.Transport) {
			tr.TLSHandshakeTimeout = TLSHandshakeTimeout
			tr.ResponseHeaderTimeout = ResponseHeaderTimeout
		})
}

// NewClient builds a DynamoDB client from the standard SDK configuration
// chain (AWS_REGION, credentials, AWS_ENDPOINT_URL_DYNAMODB or
// AWS_ENDPOINT_URL, shared config files), with aegis's retry settings and
// per-attempt timeouts (NewHTTPClient). load adds to the configuration
// chain (tests set region, credentials); optFns adjust the client (tests
// add middleware here). The per-operation deadline is the store's (New).
func NewClient(ctx context.Context, load []func(*awsconfig.LoadOptions) error, optFns ...func(*dynamodb.Options)) (*dynamodb.Client, error) {
	load = append([]func(*awsconfig.LoadOptions) error{
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = MaxAttempts
				o.MaxBackoff = MaxBackoff
			})
		}),
		awsconfig.WithHTTPClient(NewHTTPClient()),
	}, load...)
	cfg, err := awsconfig.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("dynamo: load AWS config: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("dynamo: no AWS region: set AWS_REGION")
	}
	return dynamodb.NewFromConfig(cfg, optFns...), nil
}

// Open returns a store configured from the environment: the client from the
// SDK chain and the table names from AEGIS_STATE_TABLE / AEGIS_AUDIT_TABLE.
func Open(ctx context.Context, o Options, optFns ...func(*dynamodb.Options)) (*Store, error) {
	c, err := NewClient(ctx, nil, optFns...)
	if err != nil {
		return nil, err
	}
	return New(c, TablesFromEnv(os.Getenv), o), nil
}

// mapErr turns a DynamoDB error into the store vocabulary.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("dynamo %s: %w", op, store.ErrConflict)
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		for _, r := range tc.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return fmt.Errorf("dynamo %s: %w", op, store.ErrConflict)
			}
		}
	}
	return fmt.Errorf("dynamo %s: %w: %w", op, store.ErrUnavailable, err)
}

// isConflict reports whether err (from mapErr) is a lost condition.
func isConflict(err error) bool { return errors.Is(err, store.ErrConflict) }

// InProcess implements backend.Backend: DynamoDB is a network away.
func (*Store) InProcess() bool { return false }

var _ backend.Backend = (*Store)(nil)
