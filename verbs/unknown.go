package verbs

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// unknownQueue is the queue group of the subscription that answers requests
// for no verb. It is not QueueGroup: the server picks one member per queue
// group among all the subscriptions a subject matches, so sharing the verbs'
// group would hand some verbs' requests to this subscription instead.
const unknownQueue = QueueGroup + "-unknown"

// internalTokens are the first tokens after the prefix of the keeper's own
// subjects that are no verbs: acts (<prefix>.acts.<verb>, published to a
// stream, with a reply for the acknowledgement) and progress.
var internalTokens = []string{"acts", "progress"}

// subscribeUnknown answers a request on <prefix>.<word>, where word is no
// verb and none of the keeper's own subjects, with a 404 naming the verbs,
// so that a misspelled verb over `nats request` is told so instead of
// "no responders". A request for a verb is left to the verb's own
// subscription; a message without a reply subject is not answered.
func (s *Service) subscribeUnknown() error {
	sub, err := s.nc.QueueSubscribe(s.prefix+".*", unknownQueue, func(m *nats.Msg) {
		word := strings.TrimPrefix(m.Subject, s.prefix+".")
		if m.Reply == "" || slices.Contains(Verbs(), word) || slices.Contains(internalTokens, word) {
			return
		}
		said := headerText(fmt.Sprintf("%q is not a verb of nats-keeper, so nothing was done; the verbs on %s.<verb> are %s",
			word, s.prefix, strings.Join(Verbs(), ", ")))
		body, _ := json.Marshal(ErrorBody{Error: said, Code: CodeNotFound})
		reply := nats.NewMsg(m.Reply)
		reply.Header.Set(micro.ErrorHeader, said)
		reply.Header.Set(micro.ErrorCodeHeader, strconv.Itoa(CodeNotFound))
		reply.Data = body
		if err := m.RespondMsg(reply); err != nil {
			s.log.Warn("could not answer a request for no verb", "subject", m.Subject, "err", err)
		}
	})
	if err != nil {
		return err
	}
	s.unknown = sub
	return nil
}
