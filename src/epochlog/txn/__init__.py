"""The transaction coordinator: transactional ids, their state in
``__transaction_state``, and the markers that end each transaction."""
