package mattermost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/mattermost/mattermost/server/public/model"
)

// Limits on what the client reads from a response. limitTransport applies
// them below model.Client4, which reads whole bodies.
const (
	// maxErrorBody caps the body of an answer that is not a success (an
	// AppError, a proxy's page).
	maxErrorBody = 64 << 10
	// maxPostsAnswer caps a catch-up page (GET /channels/{id}/posts): up
	// to 1000 posts of up to 16383 runes each.
	maxPostsAnswer = 256 << 20
	// maxListAnswer caps a list of teams or channels (~1 KiB per channel).
	maxListAnswer = 32 << 20
	// maxObjectAnswer caps every other answer: one user, post or upload.
	maxObjectAnswer = 4 << 20
	// maxErrorText caps the part of a body that is not AppError JSON that
	// goes into an error message.
	maxErrorText = 200
)

// errorTextHeader is where limitTransport leaves, in the response's
// in-memory header, the shortened and redacted text of an error body that
// is not AppError JSON: model.Client4 keeps the header (model.Response)
// but puts the whole body into its error. It is never sent anywhere.
const errorTextHeader = "X-Thinbot-Error-Text"

// apiClient is model.Client4 for the calls the adapter makes. Each method
// turns a failure into an *APIError (status, AppError id, message and
// request id, never the token); Client4's own error text, which holds a
// whole error body, is dropped.
type apiClient struct {
	c4    *model.Client4
	token string
}

// newAPIClient returns a Client4 for base (scheme, host and path, no
// trailing slash) that uses hc, whose transport must be a limitTransport.
func newAPIClient(base, token string, hc *http.Client) *apiClient {
	c4 := model.NewAPIv4Client(base)
	c4.HTTPClient = hc
	c4.SetToken(token)
	return &apiClient{c4: c4, token: token}
}

// getMe returns the token's user and the server's version (from
// X-Version-Id, "" if absent).
func (c *apiClient) getMe(ctx context.Context) (*model.User, string, error) {
	u, resp, err := c.c4.GetMe(ctx, "")
	if err != nil {
		return nil, "", c.apiError("get me", resp, err)
	}
	return u, resp.ServerVersion, nil
}

func (c *apiClient) getUser(ctx context.Context, id string) (*model.User, error) {
	u, resp, err := c.c4.GetUser(ctx, id, "")
	if err != nil {
		return nil, c.apiError("get user", resp, err)
	}
	return u, nil
}

func (c *apiClient) getTeamsForUser(ctx context.Context, userID string) ([]*model.Team, error) {
	ts, resp, err := c.c4.GetTeamsForUser(ctx, userID, "")
	if err != nil {
		return nil, c.apiError("get teams", resp, err)
	}
	return ts, nil
}

func (c *apiClient) getChannelsForTeamForUser(ctx context.Context, teamID, userID string) ([]*model.Channel, error) {
	chs, resp, err := c.c4.GetChannelsForTeamForUser(ctx, teamID, userID, false, "")
	if err != nil {
		return nil, c.apiError("get channels of team "+teamID, resp, err)
	}
	return chs, nil
}

func (c *apiClient) getChannelsForUser(ctx context.Context, userID string) ([]*model.Channel, error) {
	chs, resp, err := c.c4.GetChannelsForUserWithLastDeleteAt(ctx, userID, 0)
	if err != nil {
		return nil, c.apiError("get channels", resp, err)
	}
	return chs, nil
}

// getChannelMember succeeds if userID is a member of channelID.
func (c *apiClient) getChannelMember(ctx context.Context, channelID, userID string) error {
	_, resp, err := c.c4.GetChannelMember(ctx, channelID, userID, "")
	if err != nil {
		return c.apiError("get channel member", resp, err)
	}
	return nil
}

// getPostsSince lists the posts of a channel changed after since (Unix ms).
func (c *apiClient) getPostsSince(ctx context.Context, channelID string, since int64) (*model.PostList, error) {
	l, resp, err := c.c4.GetPostsSince(ctx, channelID, since, false)
	if err != nil {
		return nil, c.apiError("get posts since", resp, err)
	}
	return l, nil
}

// getRootPostsSince lists the root posts of a channel changed after since
// (Unix ms): collapsedThreads=true leaves replies out.
func (c *apiClient) getRootPostsSince(ctx context.Context, channelID string, since int64) (*model.PostList, error) {
	l, resp, err := c.c4.GetPostsSince(ctx, channelID, since, true)
	if err != nil {
		return nil, c.apiError("get root posts since", resp, err)
	}
	return l, nil
}

func (c *apiClient) createPost(ctx context.Context, p *model.Post) (*model.Post, error) {
	out, resp, err := c.c4.CreatePost(ctx, p)
	if err != nil {
		return nil, c.apiError("create post", resp, err)
	}
	return out, nil
}

func (c *apiClient) patchPost(ctx context.Context, id string, p *model.PostPatch) error {
	_, resp, err := c.c4.PatchPost(ctx, id, p)
	if err != nil {
		return c.apiError("patch post", resp, err)
	}
	return nil
}

// uploadFile uploads one file into a channel (multipart/form-data with
// channel_id before the file, as the server reads the stream in order)
// and returns the new file ids.
func (c *apiClient) uploadFile(ctx context.Context, channelID, name string, data []byte) ([]string, error) {
	res, resp, err := c.c4.UploadFile(ctx, data, channelID, name)
	if err != nil {
		return nil, c.apiError("upload file", resp, err)
	}
	ids := make([]string, 0, len(res.FileInfos))
	for _, fi := range res.FileInfos {
		if fi != nil {
			ids = append(ids, fi.Id)
		}
	}
	return ids, nil
}

// apiError turns a Client4 failure into an *APIError. resp is nil when no
// answer arrived (err is then the transport's, which names the method and
// URL: no secret, New refuses URLs with credentials). A non-success
// answer is a redirect (named, not followed), an AppError, or a body that
// is not one (limitTransport's shortened, redacted text). A success whose
// body does not decode is a decode error, "larger than N MiB" if it hit
// its cap.
func (c *apiClient) apiError(op string, resp *model.Response, err error) *APIError {
	e := &APIError{Op: op}
	if resp == nil {
		e.Err = err
		return e
	}
	e.Status, e.RequestID = resp.StatusCode, resp.RequestId
	if resp.StatusCode < 300 {
		var big *tooLargeError
		if errors.As(err, &big) {
			err = big
		}
		e.Err = fmt.Errorf("decode response: %w", err)
		return e
	}
	if resp.StatusCode < 400 {
		if loc, perr := url.Parse(resp.Header.Get("Location")); perr == nil && loc.Path+loc.Host != "" {
			e.Err = fmt.Errorf("redirected to %s://%s%s, which thinbot does not follow: set the server url to the address Mattermost answers at",
				loc.Scheme, loc.Host, loc.Path)
			return e
		}
	}
	var ae *model.AppError
	if errors.As(err, &ae) && (ae.Id != "" || ae.Message != "") {
		e.ID, e.Message = c.redact(ae.Id), c.redact(ae.Message)
		if e.RequestID == "" {
			e.RequestID = c.redact(ae.RequestId)
		}
		return e
	}
	text := resp.Header.Get(errorTextHeader)
	if text == "" {
		text = http.StatusText(resp.StatusCode)
	}
	e.Err = errors.New(text)
	return e
}

// redact removes the token from text the server sent.
func (c *apiClient) redact(s string) string { return redact(s, c.token) }

func redact(s, token string) string {
	if token == "" {
		return s
	}
	return strings.ReplaceAll(s, token, "[token]")
}

// limitTransport caps what model.Client4 can read of an answer, which it
// reads whole: a success's body by what the call can hold
// (answerLimit), any other answer's body at maxErrorBody, read here at
// once with the token removed should the server have echoed it (the body
// then goes into Client4's error). The text of an error body that is not
// AppError JSON, shortened, is left in errorTextHeader.
type limitTransport struct {
	base    http.RoundTripper
	apiPath string // the API's path on the server, e.g. /mm/api/v4
	token   string
}

// RoundTrip implements http.RoundTripper.
func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		limit := answerLimit(req.Method, strings.TrimPrefix(req.URL.Path, t.apiPath))
		resp.Body = &cappedBody{rc: resp.Body, left: limit + 1, limit: limit}
		return resp, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read error body: %w", err)
	}
	if t.token != "" {
		data = bytes.ReplaceAll(data, []byte(t.token), []byte("[token]"))
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	resp.ContentLength = int64(len(data))
	resp.Header.Del(errorTextHeader)
	var ae model.AppError
	if json.Unmarshal(data, &ae) != nil || (ae.Id == "" && ae.Message == "") {
		text := strings.TrimSpace(strings.ToValidUTF8(string(data), "?"))
		if len(text) > maxErrorText {
			text = strings.ToValidUTF8(text[:maxErrorText], "") + "…"
		}
		if text != "" {
			resp.Header.Set(errorTextHeader, text)
		}
	}
	return resp, nil
}

// answerLimit is the most a successful answer to method path (under the
// API path) may hold.
func answerLimit(method, path string) int64 {
	if method != http.MethodGet {
		return maxObjectAnswer
	}
	s := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(s) == 3 && s[0] == "channels" && s[2] == "posts":
		return maxPostsAnswer
	case len(s) == 3 && s[0] == "users" && (s[2] == "teams" || s[2] == "channels"),
		len(s) == 5 && s[0] == "users" && s[2] == "teams" && s[4] == "channels":
		return maxListAnswer
	}
	return maxObjectAnswer
}

// tooLargeError is what a cappedBody returns past its limit.
type tooLargeError struct{ limit int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("the answer is larger than %d MiB", e.limit>>20)
}

// cappedBody reads at most limit bytes of rc; one byte more is a
// *tooLargeError.
type cappedBody struct {
	rc    io.ReadCloser
	left  int64 // limit+1 minus what was read
	limit int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, &tooLargeError{limit: b.limit}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left <= 0 {
		return n - 1, &tooLargeError{limit: b.limit}
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }
