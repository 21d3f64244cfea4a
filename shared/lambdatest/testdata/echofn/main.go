// Command echofn is the lambdatest package's test function: a Lambda
// bootstrap that serves a trivial http.Handler through shared/apigw and
// answers with what it saw, so the harness test can check the whole path
// (event file → aws-lambda-rie → bootstrap → apigw → handler → response).
package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/aegis-gw/aegis/shared/apigw"
)

func main() {
	greeting := os.Getenv("ECHOFN_GREETING") // proves the harness passes env vars
	lambda.Start(apigw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		out := map[string]any{
			"greeting":   greeting,
			"method":     r.Method,
			"path":       r.URL.Path,
			"remoteAddr": r.RemoteAddr,
			"bodyBytes":  len(body),
		}
		if rc, ok := apigw.RequestContext(r.Context()); ok {
			out["requestId"] = rc.RequestID
		}
		if _, ok := r.Context().Deadline(); ok {
			out["deadline"] = true
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("Set-Cookie", "echo=1; Path=/")
		json.NewEncoder(w).Encode(out)
	})))
}
