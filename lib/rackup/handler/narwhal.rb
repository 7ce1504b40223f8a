# frozen_string_literal: true

require "narwhal/rack_handler"

# rackup >= 2 (Rack 3, and rails server on it) looks handlers up here.
module Rackup
  module Handler
    # `rackup -s narwhal`, `rails server -u narwhal`; see Narwhal::RackHandler.
    module Narwhal
      extend ::Narwhal::RackHandler
    end

    register :narwhal, Narwhal if respond_to?(:register)
  end
end
