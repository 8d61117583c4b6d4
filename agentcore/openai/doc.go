// Package openai is the model client: an agentcore.Model over an
// OpenAI-compatible /v1/chat/completions endpoint (vLLM, SGLang, Ollama,
// llama.cpp, DeepSeek, Qwen, OpenAI itself), using only net/http and
// encoding/json.
//
// # Base URL
//
// Config.BaseURL is the API root that AGENT_BASE_URL names, normally ending
// in /v1 (http://10.0.0.8:8000/v1, https://api.deepseek.com/v1). A URL whose
// path is empty or "/" gets /v1 appended (http://10.0.0.8:8000 works too);
// any other path is used as given, so proxies with their own prefix work.
// Requests go to {base}/chat/completions and {base}/models.
//
// # Streaming
//
// Calls stream (SSE) unless Config.NoStream is set. Content text is handed to
// Request.OnText as it arrives, without <think> blocks and text-form tool
// calls. Tool-call deltas are assembled by index; the final Response is
// always computed from the whole answer, so it is the same whether the call
// streamed or not. A server that ignores "stream": true and answers with one
// JSON body is handled too.
//
// # Tool calls and the text protocol
//
// Request.Tools non-nil sends them with tool_choice "auto". Tool calls that
// a model writes into its content (<tool_call>{"name":…,"arguments":…}</tool_call>,
// the Qwen/Hermes style seen when a server runs without a tool parser) are
// moved into Response.ToolCalls with generated ids. Arguments sent as a JSON
// object (Ollama) become their JSON text. Arguments are never validated
// here: invalid JSON, unknown names and missing fields reach the loop, which
// answers the model with a tool error.
//
// Request.Tools nil is the text protocol: no tools are sent, content is
// returned untouched (the loop reads the fenced shell block), and any tool
// calls and tool results left in the history from before a protocol switch
// are rewritten as plain text, because servers without tool calling may
// reject them.
//
// # Reasoning
//
// reasoning_content, reasoning and <think>…</think> text (also an unclosed
// leading think block whose opening tag came from the chat template) are
// returned in Response.Reasoning and never shown through OnText. Reasoning is
// not sent back to the server, because DeepSeek-R1 answers 400 if it is,
// unless Config.FeedReasoning is set for the models that require it on
// tool-call turns.
//
// # Errors and retries
//
// A non-2xx answer, or an error object inside a 200 answer or stream, is an
// *APIError. An HTML page from a proxy is reported as such. Errors that mean
// the prompt is too long wrap agentcore.ErrContextLength; a rejection of tool
// calling wraps agentcore.ErrToolsUnsupported. 429, 500, 502, 503, 504,
// connection errors and streams cut before any text reached OnText are
// retried with exponential backoff and jitter, honouring Retry-After.
// 400, 401, 403 and 404 are never retried, nor is a call that used up its
// per-call timeout.
package openai
