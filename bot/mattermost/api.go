package mattermost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// apiPath is the REST API's path under the server's base URL.
const apiPath = "/api/v4"

// Limits on what the client reads from a response.
const (
	// maxErrorBody caps the error body read for its AppError JSON.
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

// apiClient is a small client for the Mattermost REST API v4: the calls the
// adapter makes and the fields it reads, over net/http and encoding/json.
// Every failure is an *APIError; the token is sent in the Authorization
// header only and never appears in an error.
type apiClient struct {
	base  string // server base URL + apiPath, without a trailing slash
	token string
	hc    *http.Client
}

// user is the part of Mattermost's User the adapter reads.
type user struct {
	ID       string `json:"id"`
	Username string `json:"username"`
}

// team is the part of Mattermost's Team the adapter reads.
type team struct {
	ID string `json:"id"`
}

// channel is the part of Mattermost's Channel the adapter reads. Type is
// "O" (open), "P" (private), "D" (direct) or "G" (group).
type channel struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	DisplayName string `json:"display_name"`
	Type        string `json:"type"`
}

// channelTypeDirect is the Type of a direct-message channel.
const channelTypeDirect = "D"

// post is the part of Mattermost's Post the adapter reads, from the API
// and from "posted" events alike.
type post struct {
	ID        string    `json:"id"`
	CreateAt  int64     `json:"create_at"`
	DeleteAt  int64     `json:"delete_at"`
	UserID    string    `json:"user_id"`
	ChannelID string    `json:"channel_id"`
	RootID    string    `json:"root_id"`
	Message   string    `json:"message"`
	Type      string    `json:"type"` // "" for a user's post; system posts have a type
	Props     postProps `json:"props"`
}

// postProps are the props the adapter reads. Mattermost sets them to the
// string "true"; anything else (absent, false, a number) means no.
type postProps struct {
	FromBot     any `json:"from_bot"`
	FromWebhook any `json:"from_webhook"`
}

// fromBot reports whether a bot or an incoming webhook made the post.
func (p *post) fromBot() bool {
	return p.Props.FromBot == "true" || p.Props.FromWebhook == "true"
}

// newPost is the body of POST /posts.
type newPost struct {
	ChannelID string         `json:"channel_id"`
	RootID    string         `json:"root_id,omitempty"`
	Message   string         `json:"message"`
	FileIDs   []string       `json:"file_ids,omitempty"`
	Props     map[string]any `json:"props,omitempty"`
}

// postPatch is the body of PUT /posts/{id}/patch: the fields given replace
// the post's, props as a whole.
type postPatch struct {
	Message *string         `json:"message,omitempty"`
	Props   *map[string]any `json:"props,omitempty"`
}

// postList is the answer of GET /channels/{id}/posts.
type postList struct {
	Order []string         `json:"order"`
	Posts map[string]*post `json:"posts"`
}

// fileInfo is the part of Mattermost's FileInfo the adapter reads.
type fileInfo struct {
	ID string `json:"id"`
}

// uploadResult is the answer of POST /files.
type uploadResult struct {
	FileInfos []fileInfo `json:"file_infos"`
}

// postAction is an interactive button (Mattermost's PostAction, the fields
// thinbot sets).
type postAction struct {
	ID          string             `json:"id,omitempty"`
	Type        string             `json:"type,omitempty"`
	Name        string             `json:"name,omitempty"`
	Style       string             `json:"style,omitempty"`
	Integration *actionIntegration `json:"integration,omitempty"`
}

// actionIntegration is where Mattermost posts a button's click, and the
// context it passes along (Mattermost's PostActionIntegration).
type actionIntegration struct {
	URL     string         `json:"url,omitempty"`
	Context map[string]any `json:"context,omitempty"`
}

// postActionTypeButton is the Type of a button action.
const postActionTypeButton = "button"

// appError is the JSON body of Mattermost's error answers.
type appError struct {
	ID         string `json:"id"`
	Message    string `json:"message"`
	RequestID  string `json:"request_id"`
	StatusCode int    `json:"status_code"`
}

// getMe returns the token's user and the server's version (from
// X-Version-Id, "" if absent).
func (c *apiClient) getMe(ctx context.Context) (user, string, error) {
	var u user
	h, err := c.do(ctx, "get me", http.MethodGet, "/users/me", nil, nil, "", &u, maxObjectAnswer)
	if err != nil {
		return user{}, "", err
	}
	return u, h.Get("X-Version-Id"), nil
}

func (c *apiClient) getUser(ctx context.Context, id string) (user, error) {
	var u user
	_, err := c.do(ctx, "get user", http.MethodGet, "/users/"+url.PathEscape(id), nil, nil, "", &u, maxObjectAnswer)
	return u, err
}

func (c *apiClient) getTeamsForUser(ctx context.Context, userID string) ([]team, error) {
	var ts []team
	_, err := c.do(ctx, "get teams", http.MethodGet, "/users/"+url.PathEscape(userID)+"/teams", nil, nil, "", &ts, maxListAnswer)
	return ts, err
}

func (c *apiClient) getChannelsForTeamForUser(ctx context.Context, teamID, userID string) ([]channel, error) {
	var chs []channel
	path := "/users/" + url.PathEscape(userID) + "/teams/" + url.PathEscape(teamID) + "/channels"
	_, err := c.do(ctx, "get channels of team "+teamID, http.MethodGet, path, url.Values{"include_deleted": {"false"}}, nil, "", &chs, maxListAnswer)
	return chs, err
}

func (c *apiClient) getChannelsForUser(ctx context.Context, userID string) ([]channel, error) {
	var chs []channel
	path := "/users/" + url.PathEscape(userID) + "/channels"
	_, err := c.do(ctx, "get channels", http.MethodGet, path, url.Values{"last_delete_at": {"0"}}, nil, "", &chs, maxListAnswer)
	return chs, err
}

// getChannelMember succeeds if userID is a member of channelID.
func (c *apiClient) getChannelMember(ctx context.Context, channelID, userID string) error {
	path := "/channels/" + url.PathEscape(channelID) + "/members/" + url.PathEscape(userID)
	_, err := c.do(ctx, "get channel member", http.MethodGet, path, nil, nil, "", nil, maxObjectAnswer)
	return err
}

// getPostsSince lists the posts of a channel changed after since (Unix ms).
func (c *apiClient) getPostsSince(ctx context.Context, channelID string, since int64) (postList, error) {
	var l postList
	q := url.Values{"since": {strconv.FormatInt(since, 10)}, "collapsedThreads": {"false"}}
	_, err := c.do(ctx, "get posts since", http.MethodGet, "/channels/"+url.PathEscape(channelID)+"/posts", q, nil, "", &l, maxPostsAnswer)
	return l, err
}

func (c *apiClient) createPost(ctx context.Context, p newPost) (post, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return post{}, &APIError{Op: "create post", Err: err}
	}
	var out post
	_, err = c.do(ctx, "create post", http.MethodPost, "/posts", nil, body, "application/json", &out, maxObjectAnswer)
	return out, err
}

func (c *apiClient) patchPost(ctx context.Context, id string, p postPatch) error {
	body, err := json.Marshal(p)
	if err != nil {
		return &APIError{Op: "patch post", Err: err}
	}
	_, err = c.do(ctx, "patch post", http.MethodPut, "/posts/"+url.PathEscape(id)+"/patch", nil, body, "application/json", nil, maxObjectAnswer)
	return err
}

// uploadFile uploads one file into a channel, as multipart/form-data with
// channel_id before the file (the server reads the stream in order), and
// returns the new file ids.
func (c *apiClient) uploadFile(ctx context.Context, channelID, name string, data []byte) ([]string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if err := w.WriteField("channel_id", channelID); err != nil {
		return nil, &APIError{Op: "upload file", Err: err}
	}
	part, err := w.CreateFormFile("files", name)
	if err != nil {
		return nil, &APIError{Op: "upload file", Err: err}
	}
	part.Write(data) // a bytes.Buffer does not fail
	if err := w.Close(); err != nil {
		return nil, &APIError{Op: "upload file", Err: err}
	}
	var res uploadResult
	if _, err := c.do(ctx, "upload file", http.MethodPost, "/files", nil, buf.Bytes(), w.FormDataContentType(), &res, maxObjectAnswer); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(res.FileInfos))
	for _, fi := range res.FileInfos {
		ids = append(ids, fi.ID)
	}
	return ids, nil
}

// do sends one request with the bot's token and decodes a 2xx answer's JSON
// of at most limit bytes into out (if not nil). Any other answer becomes an
// *APIError carrying the status and the AppError's id, message and request
// id. body is sent from memory, so the rate-limit retry can replay it. do
// returns the answer's headers.
func (c *apiClient) do(ctx context.Context, op, method, path string, query url.Values, body []byte, contentType string, out any, limit int64) (http.Header, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, &APIError{Op: op, Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// A *url.Error names the method and URL, which hold no secret.
		return nil, &APIError{Op: op, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.Header, c.responseError(op, resp)
	}
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) // lets the connection be reused
		return resp.Header, nil
	}
	lr := &io.LimitedReader{R: resp.Body, N: limit}
	if err := json.NewDecoder(lr).Decode(out); err != nil {
		if lr.N == 0 {
			err = fmt.Errorf("the answer is larger than %d MiB", limit>>20)
		}
		return resp.Header, &APIError{Op: op, Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id"),
			Err: fmt.Errorf("decode response: %w", err)}
	}
	return resp.Header, nil
}

// responseError turns a failed answer into an *APIError. A body that is not
// an AppError (a proxy's page, a plain-text 429) goes into the error
// shortened, with the token removed (before shortening) should the server
// have echoed it.
func (c *apiClient) responseError(op string, resp *http.Response) *APIError {
	e := &APIError{Op: op, Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		e.Err = fmt.Errorf("read error body: %w", err)
		return e
	}
	if loc, err := resp.Location(); err == nil && resp.StatusCode >= 300 && resp.StatusCode < 400 {
		e.Err = fmt.Errorf("redirected to %s://%s%s, which thinbot does not follow: set the server url to the address Mattermost answers at",
			loc.Scheme, loc.Host, loc.Path)
		return e
	}
	var ae appError
	if json.Unmarshal(data, &ae) == nil && (ae.ID != "" || ae.Message != "") {
		e.ID, e.Message = c.redact(ae.ID), c.redact(ae.Message)
		if e.RequestID == "" {
			e.RequestID = ae.RequestID
		}
		return e
	}
	text := c.redact(strings.TrimSpace(strings.ToValidUTF8(string(data), "?")))
	if len(text) > maxErrorText {
		text = strings.ToValidUTF8(text[:maxErrorText], "") + "…"
	}
	if text == "" {
		text = http.StatusText(resp.StatusCode)
	}
	e.Err = errors.New(text)
	return e
}

// redact removes the token from text the server sent.
func (c *apiClient) redact(s string) string {
	if c.token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.token, "[token]")
}
