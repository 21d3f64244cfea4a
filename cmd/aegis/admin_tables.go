package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/metrics"
	"github.com/aegis-gw/aegis/shared/telemetry"
	"github.com/aegis-gw/aegis/shared/wiring"
)

// createTablesDetail is the help text of `aegis admin create-tables`.
const createTablesDetail = "Creates the DynamoDB tables named by AEGIS_STATE_TABLE (default aegis-state) and\n" +
	"AEGIS_AUDIT_TABLE (default aegis-audit): pk/sk strings, on-demand, TTL on \"ttl\".\n" +
	"The endpoint, region and credentials come from the standard AWS SDK settings,\n" +
	"e.g. AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:PORT for a local server."

// runCreateTables is `aegis admin create-tables`: it creates the state and
// audit tables (AEGIS_STATE_TABLE, AEGIS_AUDIT_TABLE) where the standard SDK
// settings point (AWS_ENDPOINT_URL_DYNAMODB for a local server), waits until
// they are active and turns TTL on. Tables that exist are left as they are.
func runCreateTables(args []string) int {
	fs := flag.NewFlagSet("aegis admin create-tables", flag.ContinueOnError)
	if err := parseFlags(fs, "admin create-tables", args); err != nil {
		return exitOf(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, err := dynamo.NewClient(ctx, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "aegis admin create-tables:", err)
		return 1
	}
	t := dynamo.TablesFromEnv(os.Getenv)
	if err := dynamo.CreateTables(ctx, db, t); err != nil {
		fmt.Fprintln(os.Stderr, "aegis admin create-tables:", err)
		return 1
	}
	fmt.Printf("tables ready: %s (state), %s (audit)\n", t.State, t.Audit)
	return 0
}

// openDynamo opens the DynamoDB store from the environment, as the Lambda
// functions do (shared/wiring): the SDK settings for the client,
// AEGIS_STATE_TABLE / AEGIS_AUDIT_TABLE for the tables and
// AUDIT_RETENTION_DAYS for the audit records' ttl. The tables must exist
// (`aegis admin create-tables` locally, template.yaml in AWS). opTimeout
// is --store-timeout (0: the product's deadlines).
func openDynamo(ctx context.Context, opTimeout time.Duration, tr *telemetry.Tracer, m *metrics.Registry) (*dynamo.Store, error) {
	s, err := config.FromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	var extra []func(*middleware.Stack) error
	if m != nil {
		extra = append(extra, m.AddAWSMiddleware)
	}
	st, err := wiring.OpenDynamo(ctx, s, opTimeout, tr, extra...)
	if err != nil {
		return nil, err
	}
	if err := checkTables(ctx, st.Client(), st.Tables()); err != nil {
		return nil, err
	}
	return st, nil
}

// tablesTimeout bounds the start-up check of the tables.
const tablesTimeout = 10 * time.Second

// checkTables makes sure both tables exist before the gateway uses them: a
// missing one stops start-up with the command that creates it, rather than
// a ResourceNotFoundException on the first request.
func checkTables(ctx context.Context, db *dynamodb.Client, t dynamo.Tables) error {
	ctx, cancel := context.WithTimeout(ctx, tablesTimeout)
	defer cancel()
	for _, tb := range []struct{ name, env string }{{t.State, "AEGIS_STATE_TABLE"}, {t.Audit, "AEGIS_AUDIT_TABLE"}} {
		_, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(tb.name)})
		var nf *types.ResourceNotFoundException
		switch {
		case errors.As(err, &nf):
			return fmt.Errorf("DynamoDB table %q (%s) does not exist%s; run: aegis admin create-tables", tb.name, tb.env, endpointNote())
		case err != nil:
			return fmt.Errorf("DynamoDB table %q (%s) could not be read%s: %w", tb.name, tb.env, endpointNote(), err)
		}
	}
	return nil
}

// endpointNote names the DynamoDB endpoint when one is set (a local server).
func endpointNote() string {
	for _, k := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"} {
		if v := os.Getenv(k); v != "" {
			if u, err := url.Parse(v); err == nil {
				u.User = nil // never print a credential
				v = u.String()
			}
			return " at " + v + " (" + k + ")"
		}
	}
	return ""
}
