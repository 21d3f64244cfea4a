//go:build sizemain

// Command sizemain is a functions/gateway-like main used only to measure
// the binary size impact of telemetry (docs/perf/telemetry.md). It is built
// with -tags sizemain (before) or -tags sizemain,withtelemetry (after).
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/aegis-gw/aegis/shared/apigw"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/gateway"
)

func main() {
	ctx := context.Background()
	s, err := config.FromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	d := &gateway.Options{Settings: s}
	st, err := dynamo.Open(ctx, dynamo.Options{}, dynamoOptions(d)...)
	if err != nil {
		log.Fatal(err)
	}
	g, err := gateway.New(st, d)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(apigw.Handler(g))
}
