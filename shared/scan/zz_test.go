package scan
import "testing"
func TestZZ(t *testing.T){
 for _, tx := range cleanTexts { for i := 0; i < len(tx); i++ { var c phoneCand; if (tx[i]=='+'||tx[i]=='('||isDigit(tx[i])&&numberStart(tx,i)) && readPhone(tx,i,&c) { t.Logf("cand %q", tx[i:c.end]) } } }
}
