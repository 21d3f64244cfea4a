// Command gateway is the GatewayFunction: aegis's gateway handler
// (/mcp, /mcp/{server}, /v1/invoke) behind API Gateway's HTTP API. All
// wiring is shared/wiring.LambdaGateway; a bad setting stops the cold start
// with a message naming it. The runtime's SIGTERM (sent before the
// execution environment is shut down) runs the gateway's shutdown hook,
// then the process exits instead of waiting for SIGKILL.
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
	h, shutdown, err := wiring.LambdaGateway(context.Background(), os.Getenv, version)
	if err != nil {
		fmt.Fprintln(os.Stderr, "aegis gateway function: refusing to start:", err)
		os.Exit(1)
	}
	lambda.StartWithOptions(apigw.Handler(h), lambda.WithEnableSIGTERM(shutdown, func() { os.Exit(0) }))
}
