package jsbus

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"
)

// FuzzReadAnswers: any answer the server might give a read's header get
// is taken without a panic, and a message taken is the one asked for;
// any subject filter is refused or has only whole tokens with > last; any
// consumer configuration that looks ordered is not durable.
func FuzzReadAnswers(f *testing.F) {
	f.Add(uint64(5), []byte(`{"message":{"subject":"a","seq":5,"hdrs":"TkFUUy8xLjANCg0K","data":"eA==","time":"2026-01-02T03:04:05.123456789Z"}}`), "a.*.>",
		[]byte(`{"ack_policy":"none","mem_storage":true,"num_replicas":1}`))
	f.Add(uint64(7), []byte(`{"error":{"code":404,"err_code":10037,"description":"no message found"}}`), ">",
		[]byte(`{"durable_name":"d","ack_policy":"none","mem_storage":true,"deliver_subject":"x","flow_control":true,"idle_heartbeat":5000000000}`))
	f.Add(uint64(1), []byte(`{"message":{"seq":2}}`), "a..b", []byte(`not json`))
	f.Fuzz(func(t *testing.T, seq uint64, answer []byte, filter string, cfg []byte) {
		s := decodeStored(seq, &nats.Msg{Data: answer})
		if s.err == nil && !s.gone && s.m.Seq != seq {
			t.Fatalf("asked for %d, took %d", seq, s.m.Seq)
		}
		if validFilter(filter) && (filter == "" || filter[0] == '.') {
			t.Fatalf("filter %q taken", filter)
		}
		if looksOrdered(cfg) {
			var c struct {
				Durable string `json:"durable_name"`
			}
			if json.Unmarshal(cfg, &c) != nil || c.Durable != "" {
				t.Fatalf("%s looks ordered", cfg)
			}
		}
	})
}
