package wiring

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/store"
)

// TestOpenDynamoTimeout: against a store that accepts requests and never
// answers, an operation of OpenDynamo's store with opTimeout 4 s lasts
// until that deadline (the product's would end it by 2 s), in two
// attempts that each waited 2 s for an answer (with the product's 1 s
// wait, four attempts would fit in 4 s).
func TestOpenDynamoTimeout(t *testing.T) {
	const opTimeout = 4 * time.Second
	silent := dynamotest.NewFaultProxy(t, "http://127.0.0.1:1")
	silent.Silent.Store(true)
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": silent.URL, "AWS_REGION": "us-east-1",
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
	} {
		t.Setenv(k, v)
	}
	st, err := OpenDynamo(context.Background(), config.Defaults(), opTimeout, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = st.Tenant(context.Background(), "acme")
	took := time.Since(start)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("err %v, want store.ErrUnavailable", err)
	}
	if took < opTimeout-500*time.Millisecond {
		t.Errorf("the operation ended after %s, want its deadline, %s", took, opTimeout)
	}
	if n := silent.Attempts.Load(); n < 1 || n > 2 {
		t.Errorf("%d attempts, want 1 or 2 (each waiting %s for an answer)", n, opTimeout/2)
	}
}
