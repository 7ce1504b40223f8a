# frozen_string_literal: true

require "narwhal/rack_handler"

# Rack 2's Rack::Handler (rackup, rails server) looks handlers up here.
module Rack
  module Handler
    # `rackup -s narwhal`, `rails server -u narwhal`; see Narwhal::RackHandler.
    module Narwhal
      extend ::Narwhal::RackHandler
    end

    register :narwhal, Narwhal if respond_to?(:register)
  end
end
