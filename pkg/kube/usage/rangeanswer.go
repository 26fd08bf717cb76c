package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// The range queries of the what-if read millions of points, and
// promv1.API.QueryRange reads each answer five times: encoding/json
// validates the whole body, skips the data to hand it to the result's
// decoder, which validates and skips it again into a RawMessage before
// json-iterator decodes it (10 of the 14 s of JSON in make bench-whatif's
// profile). queryRange sends the same request through the same api.Client
// and decodes the answer with one json.Unmarshal (one validation, one
// decode), whose series' values are parsed by hand from the bytes it hands
// over. Its errors are the
// *promv1.Error values QueryRange returns, so classify reads both alike.

// queryRange runs a range query as promv1.API.QueryRange does (a POST
// form, falling back to GET where the server forbids POST) and returns its
// matrix.
func queryRange(ctx context.Context, c api.Client, query string, r promv1.Range, timeout time.Duration) (model.Matrix, error) {
	u := c.URL("/api/v1/query_range", nil)
	args := url.Values{}
	args.Set("query", query)
	args.Set("start", formatTime(r.Start))
	args.Set("end", formatTime(r.End))
	args.Set("step", strconv.FormatFloat(r.Step.Seconds(), 'f', -1, 64))
	if timeout > 0 {
		args.Set("timeout", timeout.String())
	}
	encoded := args.Encode()
	req, err := http.NewRequest(http.MethodPost, u.String(), strings.NewReader(encoded))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header["Idempotency-Key"] = nil // retried on a network error, as the client's are
	resp, body, err := c.Do(ctx, req)
	if err == nil && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented) {
		u.RawQuery = encoded
		if req, err = http.NewRequest(http.MethodGet, u.String(), nil); err != nil {
			return nil, err
		}
		resp, body, err = c.Do(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	return decodeRangeAnswer(resp.StatusCode, body)
}

func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.Unix())+float64(t.Nanosecond())/1e9, 'f', -1, 64)
}

// rangeAnswer is the Prometheus HTTP API's envelope around a range query's
// result.
type rangeAnswer struct {
	Status    string           `json:"status"`
	Data      *rangeData       `json:"data"`
	ErrorType promv1.ErrorType `json:"errorType"`
	Error     string           `json:"error"`
}

type rangeData struct {
	ResultType string        `json:"resultType"`
	Result     []rangeSeries `json:"result"`
}

type rangeSeries struct {
	Metric model.Metric `json:"metric"`
	Values samplePairs  `json:"values"`
}

// samplePairs decodes a series' [[time, "value"], ...] from the bytes
// encoding/json hands over, without a second validation pass.
type samplePairs []model.SamplePair

// decodeRangeAnswer decodes a range query's HTTP answer as the client's
// apiClientImpl.Do and QueryRange do: an error status without the API's
// error body is an ErrServer or ErrClient error, a 400 or 422 carries the
// API's errorType, and an answer that is not the API's, or not a matrix,
// is an ErrBadResponse.
func decodeRangeAnswer(code int, body []byte) (model.Matrix, error) {
	if code/100 != 2 && code != http.StatusBadRequest && code != http.StatusUnprocessableEntity {
		t, msg := promv1.ErrServer, fmt.Sprintf("server error: %d", code)
		switch code / 100 {
		case 4:
			t, msg = promv1.ErrClient, fmt.Sprintf("client error: %d", code)
		case 1, 3:
			t, msg = promv1.ErrBadResponse, fmt.Sprintf("bad response code %d", code)
		}
		return nil, &promv1.Error{Type: t, Msg: msg, Detail: string(body)}
	}
	var a rangeAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		if code/100 != 2 {
			return nil, &promv1.Error{Type: promv1.ErrClient, Msg: fmt.Sprintf("client error: %d", code), Detail: string(body)}
		}
		return nil, &promv1.Error{Type: promv1.ErrBadResponse, Msg: err.Error()}
	}
	switch {
	case code/100 != 2 && a.Status == "success":
		return nil, &promv1.Error{Type: promv1.ErrBadResponse, Msg: "inconsistent body for response code"}
	case code/100 != 2:
		if a.ErrorType == "" {
			a.ErrorType = promv1.ErrClient
		}
		if a.Error == "" {
			a.Error = fmt.Sprintf("client error: %d", code)
		}
		return nil, &promv1.Error{Type: a.ErrorType, Msg: a.Error}
	case a.Status == "error":
		return nil, &promv1.Error{Type: a.ErrorType, Msg: a.Error}
	case a.Data == nil:
		return nil, errResultType{"none"} // a "success" without data
	case a.Data.ResultType != "matrix":
		return nil, errResultType{a.Data.ResultType}
	}
	m := make(model.Matrix, len(a.Data.Result))
	for i := range a.Data.Result {
		s := &a.Data.Result[i]
		m[i] = &model.SampleStream{Metric: s.Metric, Values: s.Values}
	}
	return m, nil
}

// errResultType is an answer whose result is not a matrix.
type errResultType struct{ got string }

func (e errResultType) Error() string { return "result type " + e.got + ", want matrix" }

var errPairs = errors.New(`want [[time, "value"], ...]`)

// UnmarshalJSON parses [[t, "v"], ...]: t a number of seconds, rounded to
// the millisecond (model.Time's precision; Prometheus writes at most three
// decimals), v a quoted float as
// Prometheus writes it ("NaN", "+Inf" and "-Inf" included). data is valid
// JSON (encoding/json checked it before handing it over), so only its shape
// is checked here.
func (p *samplePairs) UnmarshalJSON(data []byte) error {
	i := skipSpace(data, 0)
	if i < len(data) && data[i] == 'n' {
		*p = nil // null
		return nil
	}
	if i >= len(data) || data[i] != '[' {
		return errPairs
	}
	out := (*p)[:0]
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		*p = out
		return nil
	}
	for {
		var sp model.SamplePair
		var err error
		if i, err = parsePair(data, i, &sp); err != nil {
			return err
		}
		out = append(out, sp)
		i = skipSpace(data, i)
		if i >= len(data) {
			return errPairs
		}
		if data[i] == ']' {
			break
		}
		if data[i] != ',' {
			return errPairs
		}
		i = skipSpace(data, i+1)
	}
	*p = out
	return nil
}

// parsePair parses one [t, "v"] at data[i:] and returns the index after it.
func parsePair(data []byte, i int, sp *model.SamplePair) (int, error) {
	if i >= len(data) || data[i] != '[' {
		return 0, errPairs
	}
	i = skipSpace(data, i+1)
	j := i
	for j < len(data) && (data[j] == '-' || data[j] == '+' || data[j] == '.' || data[j] == 'e' || data[j] == 'E' || data[j] >= '0' && data[j] <= '9') {
		j++
	}
	t, err := strconv.ParseFloat(string(data[i:j]), 64)
	if err != nil || math.IsInf(t, 0) || math.Abs(t) > math.MaxInt64/1000 {
		return 0, fmt.Errorf("sample time %q: %w", data[i:j], errPairs)
	}
	i = skipSpace(data, j)
	if i >= len(data) || data[i] != ',' {
		return 0, errPairs
	}
	i = skipSpace(data, i+1)
	if i >= len(data) || data[i] != '"' {
		return 0, errPairs
	}
	j = i + 1
	for j < len(data) && data[j] != '"' && data[j] != '\\' {
		j++
	}
	if j >= len(data) || data[j] != '"' {
		return 0, fmt.Errorf("sample value: %w", errPairs) // an escape: no number has one
	}
	v, err := strconv.ParseFloat(string(data[i+1:j]), 64)
	if err != nil {
		return 0, fmt.Errorf("sample value %q: %w", data[i+1:j], errPairs)
	}
	i = skipSpace(data, j+1)
	if i >= len(data) || data[i] != ']' {
		return 0, errPairs
	}
	sp.Timestamp = model.Time(math.Round(t * 1000))
	sp.Value = model.SampleValue(v)
	return i + 1, nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}
