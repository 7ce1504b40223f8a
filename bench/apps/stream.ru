# frozen_string_literal: true

# stream: "/big" streams a 50 MB body in 64 KiB chunks, its length unknown
# up front (no Content-Length); every other path answers hello with a
# Content-Length, for the fast client measuring beside the big responses.
CHUNK = ("x" * 65_536).freeze
CHUNKS = 800 # 800 × 64 KiB = 50 MiB

# A body produced chunk by chunk, as a report or an export is.
class StreamedBody
  def each
    CHUNKS.times { yield CHUNK }
  end
end

run lambda { |env|
  if env["PATH_INFO"] == "/big"
    [200, { "content-type" => "application/octet-stream" }, StreamedBody.new]
  else
    [200, { "content-type" => "text/html", "content-length" => "12" }, ["Hello, Rack!"]]
  end
}
