// The chat page served at GET /: one HTML file with its CSS and JavaScript inside (no external assets). It
// keeps the conversation in the browser, streams each reply from /v1/chat/completions, can stop it (the
// request is aborted, which frees the slot), and shows the generation speed the server reports.
#pragma once

#include <string>

namespace tilellm::serve {

const std::string& chat_page_html();

}  // namespace tilellm::serve
