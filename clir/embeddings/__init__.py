"""embeddings"""
