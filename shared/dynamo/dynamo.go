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
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"github.com/aegis-gw/aegis/shared/backend"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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
}

// Store implements the state interfaces over DynamoDB. It is safe for
// concurrent use and holds no state of its own besides the client.
type Store struct {
	db     *dynamodb.Client
	tables Tables
	opt    Options
}

// New returns a store over client with the given tables.
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
	return &Store{db: client, tables: t, opt: o}
}

// Client returns the underlying client (admin tools, tests).
func (s *Store) Client() *dynamodb.Client { return s.db }

// Tables returns the table names.
func (s *Store) Tables() Tables { return s.tables }

// Retry settings of the client: the SDK's standard retryer (exponential
// backoff with jitter, throttling errors such as
// ProvisionedThroughputExceededException included), with a short cap on
// each wait so that retries fit in a request's deadline. The context's
// deadline bounds the whole operation, waits included.
const (
	MaxAttempts = 5
	MaxBackoff  = 400 * time.Millisecond
)

// NewClient builds a DynamoDB client from the standard SDK configuration
// chain (AWS_REGION, credentials, AWS_ENDPOINT_URL_DYNAMODB or
// AWS_ENDPOINT_URL, shared config files), with aegis's retry settings.
// load adds to the configuration chain (tests set region, credentials);
// optFns adjust the client (tests add middleware here).
func NewClient(ctx context.Context, load []func(*awsconfig.LoadOptions) error, optFns ...func(*dynamodb.Options)) (*dynamodb.Client, error) {
	load = append([]func(*awsconfig.LoadOptions) error{
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = MaxAttempts
				o.MaxBackoff = MaxBackoff
			})
		}),
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
