# Narwhal's config file: read by `narwhal -c config/narwhal.rb` and, found
# here, by `rails server -u narwhal` too.
worker_processes 2
timeout 30
preload_app true

after_worker_ready do |server, worker|
  server.logger.info("sample_app: worker=#{worker.nr} serving Rails #{Rails.version}")
end
