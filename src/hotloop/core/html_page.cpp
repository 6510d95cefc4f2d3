#include "hotloop/core/html_page.h"

#include "hotloop/core/svg_chart.h"

namespace hotloop::html {

std::string page(const std::string& title, const std::string& body) {
  return "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>" +
      svg::escape(title) +
      "</title>\n<style>"
      "body{font-family:sans-serif;margin:24px auto;padding:0 24px;max-width:1100px}"
      "table{border-collapse:collapse;margin:12px 0}"
      "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left;font-size:14px}"
      "table.numbers td,table.numbers th{text-align:right;padding:3px 6px;font-size:13px}"
      "table.numbers td:first-child,table.numbers th:first-child{text-align:left}"
      "svg{display:block;margin:18px 0}.note{color:#666}"
      "code{background:#f4f4f4;padding:2px 4px}"
      "</style>\n</head><body>\n" +
      body + "</body></html>\n";
}

} // namespace hotloop::html
