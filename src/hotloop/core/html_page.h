#pragma once
// The one page skeleton of hotloop's self-contained HTML reports (bench's,
// watch's and a training run's): the document, its title and one stylesheet
// around a body the report writes. No script, no network.

#include <string>

namespace hotloop::html {

// `body` (HTML) in a page titled `title` (plain text: escaped here). Tables
// of class "numbers" align their columns right but the first.
std::string page(const std::string& title, const std::string& body);

} // namespace hotloop::html
