package dynamotest

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aegis-gw/aegis/internal/testtools"
)

func TestMain(m *testing.M) { Main(m) }

// TestStart starts moto_server and finds the fresh pair of tables there.
func TestStart(t *testing.T) {
	e := Start(t)
	out, err := e.Client(t).ListTables(context.Background(), &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{e.Tables.State, e.Tables.Audit} {
		if !slices.Contains(out.TableNames, name) {
			t.Errorf("table %s not in %v", name, out.TableNames)
		}
	}
}

// TestStartWithoutMotoFails runs TestStart with no moto_server on PATH and
// CI unset: it must fail naming moto_server and how to install it, not
// skip.
func TestStartWithoutMotoFails(t *testing.T) {
	testtools.ExpectMissing(t, "^TestStart$", "moto_server")
}
