package verbs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/nats-keeper/nats-keeper/kept"
)

// requestKeys are the exact keys a request may carry (kebab-case, case
// sensitive, unlike encoding/json's own matching).
var requestKeys = map[string]bool{
	"module": true, "local": true, "form": true, "fingerprint": true, "catch-up": true,
	"from": true, "aside-only": true, "caller": true, "why": true, "dry-run": true,
	"keep-for": true, "policy": true, "streams": true, "consumers": true,
	"replicas": true, "placement-cluster": true, "placement-tags": true,
	"limit": true, "after": true, "method": true, "downstream": true,
	"capture": true, "settings": true, "at": true, "at-seq": true,
}

// DecodeRequest strictly decodes one request body for verb and checks it with
// CheckRequest. The body must be exactly one JSON object of at most MaxBody
// bytes whose keys are the contract's, each once, spelled exactly, with the
// right types. Every error wraps kept.ErrBadRequest and ends
// "so nothing was done".
func DecodeRequest(verb string, body []byte) (kept.Request, error) {
	var r kept.Request
	if len(body) > MaxBody {
		return r, badRequest(verb, "was refused: the request is %d bytes, more than the %d allowed", len(body), MaxBody)
	}
	if err := checkKeys(body); err != nil {
		return r, badRequest(verb, "was refused: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return kept.Request{}, badRequest(verb, "was refused: %v", jsonProblem(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return kept.Request{}, badRequest(verb, "was refused: there is more after the request object")
	}
	// An empty list says what a missing key says, so it decodes to the same
	// request and survives a round trip (omitempty drops it on the way out).
	if len(r.PlacementTags) == 0 {
		r.PlacementTags = nil
	}
	if len(r.Streams) == 0 {
		r.Streams = nil
	}
	if len(r.Consumers) == 0 {
		r.Consumers = nil
	}
	if err := CheckRequest(verb, r); err != nil {
		return kept.Request{}, err
	}
	return r, nil
}

// checkKeys walks the top-level object and refuses anything but one object
// whose keys are known, exact and not repeated.
func checkKeys(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("the request is empty; send a JSON object such as {}")
		}
		return fmt.Errorf("the request is not JSON: %v", jsonProblem(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("the request is not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("the request is not JSON: %v", jsonProblem(err))
		}
		key, _ := tok.(string)
		if !requestKeys[key] {
			return fmt.Errorf("the key %q is not one a request may have", clip(key))
		}
		if seen[key] {
			return fmt.Errorf("the key %q appears twice", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("the value of %q is not JSON: %v", key, jsonProblem(err))
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("the request is not JSON: %v", jsonProblem(err))
	}
	return nil
}

// jsonProblem turns encoding/json's errors into a short phrase.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%q must be %s, not a JSON %s", te.Field, jsonKind(te.Type), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("bad JSON at byte %d (%v)", se.Offset, se)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "the JSON ends too soon"
	}
	return err.Error()
}

// jsonKind says in words what a request field of type t holds.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "a JSON object"
	}
	return "a " + t.String()
}
