# frozen_string_literal: true

module Bench
  # wrk, with a Lua report that adds p99.9 and the standard deviation.
  module Wrk
    SCRIPT = File.join(DIR, "wrk", "report.lua")

    module_function

    def command(port, threads:, connections:, seconds:, close: false, timeout: 2, path: "/")
      cmd = ["wrk", "-t#{threads}", "-c#{connections}", "-d#{seconds}s", "--timeout", "#{timeout}s", "-s", SCRIPT]
      cmd += ["-H", "Connection: close"] if close
      cmd << "http://#{HOST}:#{port}#{path}"
    end

    def run(port, **opts)
      cmd = command(port, **opts)
      out = IO.popen(cmd, err: %i[child out], &:read)
      json = out[/^BENCH_JSON (.*)$/, 1]
      raise "#{cmd.join(' ')} failed:\n#{out}" unless $?.success? && json

      result(JSON.parse(json), cmd)
    end

    def result(raw, cmd)
      ms = ->(us) { (raw[us] / 1000.0).round(3) }
      socket = raw.slice("connect", "read", "write", "timeout")
      {
        "rps" => (raw["requests"] / (raw["duration_us"] / 1e6)).round(1),
        "requests" => raw["requests"],
        "p50_ms" => ms.call("p50_us"), "p99_ms" => ms.call("p99_us"), "p999_ms" => ms.call("p999_us"),
        "max_ms" => ms.call("max_us"), "stdev_ms" => ms.call("stdev_us"),
        "errors" => socket.values.sum + raw["status"],
        "error_detail" => socket.merge("non_2xx_3xx" => raw["status"]),
        "command" => cmd.join(" ")
      }
    end

    # Every error is a read error at the end of a response framed by closing
    # the connection (no Content-Length): wrk counts each such complete
    # response as a read error. Not a failed request.
    def eof_framed?(result)
      d = result["error_detail"]
      return false unless d&.key?("read") # not a wrk result

      d["non_2xx_3xx"].zero? && result["errors"].positive? && d["read"] == result["errors"] &&
        (d["read"] - result["requests"]).abs <= result["requests"] / 100 + 64
    end
  end

  # ApacheBench, for the burst of new connections.
  module Ab
    module_function

    def run(port, requests:, concurrency:)
      cmd = ["ab", "-q", "-r", "-s", "30", "-n", requests.to_s, "-c", concurrency.to_s, "http://#{HOST}:#{port}/"]
      out = IO.popen(cmd, err: %i[child out], &:read)
      rps = out[/Requests per second:\s+([\d.]+)/, 1]
      raise "ab stopped: #{out.lines.grep(/apr_|error|timeout/i).last&.strip || out.lines.last&.strip}" unless rps

      complete = out[/Complete requests:\s+(\d+)/, 1].to_i
      failed = out[/Failed requests:\s+(\d+)/, 1].to_i
      non2xx = out[/Non-2xx responses:\s+(\d+)/, 1].to_i
      {
        "rps" => rps.to_f, "requests" => complete,
        "p50_ms" => pct(out, 50), "p99_ms" => pct(out, 99), "max_ms" => pct(out, 100),
        # Requests ab never completed count as failed too.
        "errors" => failed + non2xx + (requests - complete),
        "error_detail" => { "failed" => failed, "non_2xx" => non2xx, "not_completed" => requests - complete,
                            "exit_status" => $?.exitstatus },
        "command" => cmd.join(" ")
      }
    end

    def pct(out, pct)
      out[/^\s+#{pct}%\s+(\d+)/, 1]&.to_f
    end
  end
end
