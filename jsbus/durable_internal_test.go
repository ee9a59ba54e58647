package jsbus

import (
	"encoding/json"
	"testing"
)

// FuzzDurable checks durable's shortcuts against a whole decode, on
// configurations written the way the server writes them (its
// ConsumerConfig's first fields, in its order, through encoding/json).
func FuzzDurable(f *testing.F) {
	f.Add("c1", "c1", "", "")
	f.Add("", "eph", "an ephemeral", "x")
	f.Add(`"quoted"`, "", `{"durable_name":"x"}`, `"durable_name"`)
	f.Add("", "", "", "durable_name")
	f.Fuzz(func(t *testing.T, durableName, name, description, metaKey string) {
		cfg := struct {
			Durable     string            `json:"durable_name,omitempty"`
			Name        string            `json:"name,omitempty"`
			Description string            `json:"description,omitempty"`
			AckPolicy   string            `json:"ack_policy"`
			Metadata    map[string]string `json:"metadata,omitempty"`
		}{durableName, name, description, "explicit", map[string]string{metaKey: durableName}}
		raw, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var whole struct {
			Durable string `json:"durable_name"`
		}
		if err := json.Unmarshal(raw, &whole); err != nil {
			t.Fatal(err)
		}
		if got, want := durable(raw), whole.Durable != ""; got != want {
			t.Fatalf("durable(%s) = %v, want %v", raw, got, want)
		}
	})
}
