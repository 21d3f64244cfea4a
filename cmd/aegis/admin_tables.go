package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/dynamo"
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
// (`aegis admin create-tables` locally, template.yaml in AWS).
func openDynamo(ctx context.Context) (*dynamo.Store, error) {
	s, err := config.FromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	return wiring.OpenDynamo(ctx, s, nil)
}
