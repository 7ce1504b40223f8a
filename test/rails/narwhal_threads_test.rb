# frozen_string_literal: true

require_relative "rails_app_cases"

# The sample app on request threads: every case of RailsAppCases again,
# and concurrent requests from several clients on keep-alive connections.
class NarwhalThreadsTest < Minitest::Test
  include RailsAppCases

  def self.start_server
    Narwhal::RailsApp.start([Gem.bin_path("bundler", "bundle"), "exec", "narwhal", "-c", "config/narwhal.rb",
                             "--threads", "4", "-l", "127.0.0.1:0"])
  end

  def test_concurrent_clients_on_four_threads_per_worker
    failures = Queue.new
    Array.new(8) do |t|
      Thread.new do
        Net::HTTP.start(server.host, server.port, open_timeout: 5, read_timeout: 30) do |h|
          10.times do |i|
            body = JSON.generate(item: "#{t}-#{i}", pad: "x" * (i * 1000))
            r = h.post("/echo", body, "content-type" => "application/json")
            echoed = r.code == "200" && JSON.parse(r.body).values_at("item", "raw_post_bytes")
            failures << "#{t}/#{i}: #{r.code} #{r.body[0, 80]}" unless echoed == ["#{t}-#{i}", body.bytesize]
          end
        end
      rescue StandardError => e
        failures << "client #{t}: #{e.class}: #{e.message}"
      end
    end.each(&:join)
    assert_empty Array.new(failures.size) { failures.pop }
  end
end
