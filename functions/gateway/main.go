// Command gateway is the GatewayFunction: aegis's gateway handler
// (/mcp, /mcp/{server}, /v1/invoke) behind API Gateway's HTTP API. All
// wiring is shared/wiring.LambdaGateway; a bad setting stops the cold start
// with a message naming it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/aegis-gw/aegis/shared/apigw"
	"github.com/aegis-gw/aegis/shared/wiring"
)

var version = "dev"

func main() {
	h, err := wiring.LambdaGateway(context.Background(), os.Getenv, version)
	if err != nil {
		fmt.Fprintln(os.Stderr, "aegis gateway function: refusing to start:", err)
		os.Exit(1)
	}
	lambda.Start(apigw.Handler(h))
}
